"""What a check can find, below everything that finds or reports it: the diagnostic model
(locations, related places, severities), the rule catalog with one page per rule
(``rule_docs/``, installed from ``docs/rules``) and the result a check returns."""
