"""The check pipeline's stages, one module each (docs/architecture.md §3)."""
