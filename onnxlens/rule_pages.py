"""``onnxlens rule``: a rule's page rendered for a terminal (rich's Markdown renderer), its
links made readable where a terminal cannot follow them; ``rule --all``: the catalog, with
the rules that are off unless selected marked."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Markdown, MarkdownElement
from rich.syntax import Syntax

from exporter.findings.rules import RULES, rule_page
from exporter.reports.render import OFF_BY_DEFAULT

#: a Markdown link: its text and its target
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_RULE_FILE = re.compile(r"(ONNX\d{3})\.md(?:#.*)?")


def terminal_markdown(markdown: str) -> str:
    """The page with each relative link spelled out: ``[ONNX106](ONNX106.md)`` is "ONNX106"
    (and another text for a rule "… (`onnxlens rule ONNX106`)"), ``[checks](../checks.md)``
    "checks (docs/checks.md)"; web addresses stay links, which the renderer prints."""

    def readable(match: re.Match[str]) -> str:
        text, target = match.groups()
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            return match.group(0)
        rule = _RULE_FILE.fullmatch(target)
        if rule is not None:
            return text if text.strip("`") == rule.group(1) \
                else f"{text} (`onnxlens rule {rule.group(1)}`)"
        if target.startswith("#"):
            return text
        page = target.split("#")[0]
        path = page.removeprefix("../") if page.startswith("../") else f"rules/{page}"
        return f"{text} (docs/{path})"

    return _LINK.sub(readable, markdown)


def print_rule(rule_id: str, console: Console | None = None) -> None:
    """The page, rendered on a terminal (piped: its Markdown, the links spelled out, which
    reads as plain text and loses nothing to a width), then its web address."""
    page = terminal_markdown(rule_page(rule_id))
    address = RULES[rule_id].doc_url
    console = console or Console(highlight=False)
    if not console.is_terminal:
        console.file.write(page + (f"\n{address}\n" if address else ""))
        return
    console.print(_WrappedMarkdown(page, hyperlinks=False))
    if address:
        console.print(address)


class _WrappedCodeBlock(CodeBlock):
    """A code block wrapped at the terminal's width (rich crops it: an example's error
    message lost its end)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Syntax(str(self.text).rstrip(), self.lexer_name, theme=self.theme,
                     word_wrap=True, padding=1)


class _WrappedMarkdown(Markdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements, "fence": _WrappedCodeBlock, "code_block": _WrappedCodeBlock}


def catalog() -> str:
    """Every rule: id, name, default severity, on or off by default, summary."""
    lines = [f"{'id':<8} {'name':<28} {'severity':<8} {'default':<7} summary"]
    for rule in RULES.values():
        default = "off" if rule.id in OFF_BY_DEFAULT else "on"
        lines.append(f"{rule.id:<8} {rule.name:<28} {rule.severity.value:<8} {default:<7} "
                     f"{rule.summary}")
    lines.append("Rules off by default report only when selected (--select ONNX106, or "
                 "`select` in [tool.onnxlens]).")
    return "\n".join(lines) + "\n"
