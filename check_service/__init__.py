"""Checking files, written once for both front ends (docs/architecture.md §1).

Between the front ends (``onnxlens``, ``lsp_server``) and the export worker: a file's text
decoded and its targets found once (``files``), one job per target built one way
(``requests``), a file's targets checked, early findings streamed, the fixes tried and the
suppressions applied (``file_check``), the rules and severities the settings select
(``rules``), a job's outcome as a result (``outcomes``, ``fix_trials``), and the CLI's batch of
files (``batch``). It never imports torch: a check runs in the worker.
"""
