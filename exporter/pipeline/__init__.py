"""One target's check: the session that stays warm, the stages (``stages/``) and the typed
products they hand on, the runtimes they compare, and the models they save."""
