"""Every private capability of the torch layer forced off at once (as on a torch that moved
them all): each fixture still gets the exporter's verdict, never a false error, never a
failing export called clean. Runs on the primary torch: the fallbacks are torch's public APIs,
whose verdicts the corpus and the fixtures check on every torch (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

from exporter.pipeline.session import ExportSession
from exporter.toolchain import torch_compat
from tests.conftest import FIXTURES
from tests.exporter.pipeline.test_fixture_diagnostics import EXPECTED


def _errors(result) -> list[str]:
    return sorted(d.rule for d in result.diagnostics if d.severity.value == "error")


@pytest.fixture(scope="module")
def results_without_capabilities():
    """Every fixture checked with every private capability forced off (speed patches on)."""
    os.environ[torch_compat.ENVIRONMENT_VARIABLE] = "all"
    try:
        session = ExportSession()
        results = {}
        for name in EXPECTED:
            workspace, _, file = name.rpartition("/")
            results[name] = session.check_file(FIXTURES / workspace / file, FIXTURES / workspace)
    finally:
        del os.environ[torch_compat.ENVIRONMENT_VARIABLE]
    return results


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_false_error_and_no_missed_failure_without_private_capabilities(
        results_without_capabilities, name):
    """A fixture torch.onnx.export exports cleanly stays clean; one that fails still fails
    (its diagnostics may be coarser: torch's first error instead of every problem)."""
    expected_errors = [row for row in EXPECTED[name] if row[-1] == "error"]
    errors = _errors(results_without_capabilities[name])
    if expected_errors:
        assert errors, f"{name}: a failing export called clean without the private capabilities"
    else:
        assert errors == [], f"{name}: false error without the private capabilities"
