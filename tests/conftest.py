"""Shared fixtures: one warm export session for the whole run (as the worker will keep one)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "exporter" / "fixtures"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def session():
    from exporter.session import ExportSession

    export_session = ExportSession()
    export_session.warm_up()
    return export_session


@pytest.fixture(scope="session")
def fixture_results(session):
    """Check every fixture file once; tests read the results."""
    results = {}
    for workspace in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for path in sorted(workspace.glob("*.py")):
            results[f"{workspace.name}/{path.name}"] = (workspace.resolve(),
                                                        session.check_file(path, workspace))
    return results
