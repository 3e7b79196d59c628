"""Which findings a user is shown: the rules the settings select, at the severities they give
(applied once, for every front end and output)."""

from __future__ import annotations

from collections.abc import Iterable

from exporter.config.options import Options
from exporter.findings.diagnostics import Diagnostic
from exporter.reports.render import apply_severity, filter_rules


def shown(diagnostics: Iterable[Diagnostic], settings: Options) -> list[Diagnostic]:
    """``select``/``ignore`` (ids or prefixes; without ``select`` the rules that are off by
    default are left out), then ``severity``."""
    kept = filter_rules(diagnostics, settings.select or None, settings.ignore or None)
    return apply_severity(kept, settings.severity)
