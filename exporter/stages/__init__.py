"""The check pipeline's stages, one module each (DESIGN §3)."""
