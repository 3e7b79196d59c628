"""Settings: the schema that declares each one once, the one options type built from it, and
the project defaults from ``[tool.onnxlens]``."""
