"""SARIF's ``tool.driver.rules``: every rule with its descriptions, its page on the web
(``helpUri``) and the page's whole text (``help``), as a SARIF viewer and GitHub code
scanning show them."""

from __future__ import annotations

import re
from urllib.parse import urljoin

import sarif_om as sarif

from exporter.findings.rules import RULES, Rule, Severity, published_doc_url, rule_page

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# a Markdown link's target that is relative (`[ONNX106](ONNX106.md)`, `(../fixes.md)`)
_RELATIVE_LINK = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:|#)([^)\s]+)\)")


def descriptor(rule_id: str) -> sarif.ReportingDescriptor:
    rule = RULES[rule_id]
    url = published_doc_url(rule.id)
    page = _absolute_links(_page(rule), url)
    return sarif.ReportingDescriptor(
        id=rule.id, name=rule.name,
        short_description=sarif.MultiformatMessageString(text=rule.summary),
        full_description=sarif.MultiformatMessageString(text=rule.description),
        help=sarif.MultiformatMessageString(text=page, markdown=page),
        help_uri=url,
        default_configuration=sarif.ReportingConfiguration(level=LEVELS[rule.severity]),
        properties={"stage": rule.stage},
    )


def _page(rule: Rule) -> str:
    """The rule's page (``docs/rules/<ID>.md``, installed with onnxlens); without it, what
    the catalog says of the rule."""
    try:
        return rule_page(rule.id).strip()
    except (OSError, UnicodeDecodeError):
        return (f"# {rule.id}: {rule.name}\n\n{rule.summary}\n\n{rule.description}\n\n"
                f"## How to fix it\n\n{rule.fix}")


def _absolute_links(page: str, url: str) -> str:
    """The page's links to other pages resolved against its own address: a log is read far
    from the docs directory (``ONNX106.md`` -> ``<base>/ONNX106.md``)."""
    return _RELATIVE_LINK.sub(lambda match: f"]({urljoin(url, match[1])})", page)
