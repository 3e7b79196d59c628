"""The warm, forking export worker that the CLI and the language server share.

``process`` is the worker (``python -m export_worker.process``): it imports the export
toolchain once and runs every job in a fresh fork. ``client`` starts and talks to it,
``messages`` is the protocol between them, ``jobs`` is what a forked job does and
``outcomes`` turns a job that died into the diagnostic at its target. docs/architecture.md
has the whole picture.
"""
