"""The fixes worth trying for a failed check (docs/fixes.md): edits of the target's file,
proposed here and tried by the front end, each in a check of its own (``FixTrial``).

Where each comes from:

* **torch**: the ``dynamic_shapes`` torch.export suggests when a declared dimension is
  specialized (ONNX102; ``locating.report_guard`` proposes it where it reports the finding);
* **transformers**: its own settings for export, on the config the target builds:
  ``attn_implementation="eager"`` (attention as plain tensor operations instead of the SDPA
  or flash kernels; transformers' docs, "Attention interface"), ``experts_implementation``
  ``"batched_mm"`` or ``"eager"`` for a mixture of experts (``torch.bmm`` or a loop instead
  of ``grouped_mm``, which has no ONNX translation; ``from_pretrained``'s docs; transformers'
  own ONNX exporter switches to ``batched_mm``) and ``use_cache=False`` (no cache object among
  the outputs; transformers' docs, "Export to ONNX");
* **timm**: ``exportable=True`` on the user's ``timm.create_model(...)`` (timm's layer config
  "traceable / ONNX exportable": among others its attention modules then compute attention
  as plain tensor operations instead of ``F.scaled_dot_product_attention``, whose
  decomposition fails with their position biases; ``timm/layers/config.py``,
  ``use_fused_attn``);
* **onnxlens**: a specialized dimension made static (ONNX102); torch.onnx's default opset
  where a runtime named cannot take, run or match the model exported at another one
  (ONNX701-703, ONNX705: from opset 23 the exporter writes attention and RMS normalization as
  the single operators ``Attention`` and ``RMSNormalization``, which NNAPI and CoreML, for
  one, do not take; at the default they are the plain operators they are made of).

A candidate is only ever an edit of text the user wrote; nothing here is shown before it was
tried and worked.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator

from exporter.findings.diagnostics import Diagnostic
from exporter.findings.fixes import FixCandidate, FixEdit
from exporter.findings.positions import Range
from exporter.findings.rules import Severity
from exporter.pipeline.context import CheckContext
from exporter.source.edits import keyword_edits
from exporter.source.export_calls import export_calls
from exporter.source.notebooks import is_notebook
from exporter.source.python_syntax import parse_python
from exporter.source.targets import Target
from exporter.source.text import node_range, split_lines
from exporter.toolchain import torch_compat

#: the stages whose failures a different export setting can change
_EXPORT_STAGES = ("capture", "translate", "validate", "runtime", "numerics", "dynamic",
                  "deploy")
#: what a runtime named says of the model as exported: cannot take a node, fails, differs,
#: leaves nodes to the CPU (a precision's losses, ONNX706/707, have their own fix)
_RUNTIME_FINDINGS = {"ONNX701": "then load and run it", "ONNX702": "then load and run it",
                     "ONNX703": "then match PyTorch", "ONNX705": "then take these nodes"}
#: factories that take a config's keywords: ``AutoConfig.from_pretrained(..., use_cache=...)``
_CONFIG_FACTORIES = ("for_model", "from_pretrained", "from_dict")
#: model factories that pass keywords on to the config (``attn_implementation`` among them)
_MODEL_FACTORIES = ("from_pretrained", "from_config")


def fix_candidates(ctx: CheckContext, diagnostics: list[Diagnostic]) -> list[FixCandidate]:
    """What is worth trying for ``diagnostics``, the check's findings: the candidates the
    stages proposed, then the library's settings; none for a check that failed to load, ran
    out of time or memory, or has nothing to fix."""
    errors = [d for d in diagnostics if d.severity == Severity.ERROR]
    if is_notebook(ctx.target.path) or any(d.stage not in _EXPORT_STAGES for d in errors):
        return []
    if not errors:  # a runtime's fallback (a warning) has a fix too
        return list(_default_opset(ctx, diagnostics))
    return [*ctx.fix_candidates, *_default_opset(ctx, diagnostics),
            *_transformers_settings(ctx), *_timm_settings(ctx)]


def _default_opset(ctx: CheckContext, diagnostics: list[Diagnostic]) -> Iterator[FixCandidate]:
    """torch.onnx's default opset, for the first finding of a runtime named on a model
    exported at another opset: the pragma's (or the export call's) opset changed, else
    ``opset=...`` added to the pragma (the project's setting gave the other one)."""
    found = next((d for d in diagnostics if d.rule in _RUNTIME_FINDINGS), None)
    requested = ctx.options.opset
    default = torch_compat.default_opset()
    if found is None or requested is None or int(requested) == default:
        return
    edit = opset_edit(ctx.target, ctx.sources.read(ctx.target.path), default)
    if edit is None:
        return
    yield FixCandidate(
        "onnxlens:default-opset", f"Export at opset {default}, torch.onnx's default, instead "
        f"of opset {requested}: the runtimes named {_RUNTIME_FINDINGS[found.rule]}", "onnxlens",
        (edit,), (found.rule, found.location.range))


def opset_edit(target: Target, source: str, opset: int) -> FixEdit | None:
    """The edit that exports ``target`` (found in ``source``) at ``opset``: its pragma's
    ``opset=`` or its export call's literal ``opset_version=`` changed, else ``opset=`` added
    at the end of its pragma; None for an export call without a literal one."""
    path = target.path
    option = target.options.get("opset")
    if option is not None:
        return FixEdit(path, option.range, str(opset))
    lines = split_lines(source)
    if target.export_call_line is not None:
        calls = export_calls(path, parse_python(source), lines)
        call = next((c for c in calls if c.range.start.line == target.export_call_line), None)
        argument = call.keywords.get("opset_version") if call is not None else None
        if argument is None or call is None or call.literal("opset_version") is ...:
            return None
        return FixEdit(path, node_range(argument.node, lines), str(opset))
    pragma = target.pragma
    if pragma is None:
        return None
    before = lines[pragma.end.line - 1][:pragma.end.column - 1]
    if pragma.start == pragma.end:  # "# onnx-export:" alone
        separator = "" if before[-1:].isspace() else " "
    else:
        separator = " " if before.rstrip().endswith(",") else ", "
    return FixEdit(path, Range(pragma.end, pragma.end), f"{separator}opset={opset}")


def _transformers_settings(ctx: CheckContext) -> Iterator[FixCandidate]:
    transformers = sys.modules.get("transformers")
    model = ctx.loaded.model if ctx.loaded is not None else None
    if transformers is None or not isinstance(model, transformers.PreTrainedModel):
        return
    config = model.config
    settings = []
    if getattr(config, "_attn_implementation", None) not in (None, "eager"):
        settings.append(("attn_implementation", '"eager"'))
    if getattr(config, "use_cache", None) is True:
        settings.append(("use_cache", "False"))
    experts = getattr(config, "_experts_implementation", None)
    if not settings and experts in (None, "eager", "batched_mm"):
        return
    source = ctx.sources.read(ctx.target.path)
    lines = split_lines(source)
    call = config_call(parse_python(source), ctx.target.symbol)
    if call is None:
        return
    described = {"attn_implementation": "attention as plain tensor operations",
                 "use_cache": "no cache among the outputs"}
    for name, value in settings:
        yield FixCandidate(
            f"transformers:{name}", f"Build the model with `{name}={value}` "
            f"({described[name]})", "transformers",
            keyword_edits(ctx.target.path, lines, call, {name: value}))
    if experts not in (None, "eager", "batched_mm"):
        for value, how in (("batched_mm", "the experts with `torch.bmm`"),
                           ("eager", "the experts one after the other")):
            yield FixCandidate(
                f"transformers:experts_implementation={value}",
                f'Build the model with `experts_implementation="{value}"` ({how})',
                "transformers", keyword_edits(ctx.target.path, lines, call,
                                              {"experts_implementation": f'"{value}"'}))
    if len(settings) > 1:
        both = dict(settings)
        yield FixCandidate(
            "transformers:" + "+".join(both),
            "Build the model with " + " and ".join(f"`{k}={v}`" for k, v in both.items()),
            "transformers", keyword_edits(ctx.target.path, lines, call, both))


def _timm_settings(ctx: CheckContext) -> Iterator[FixCandidate]:
    """``exportable=True`` for a model with timm's fused attention, built by the one
    ``timm.create_model(...)`` of the target's function: the only thing the switch changes
    that export needs (with today's torch its activations are the same either way)."""
    model = ctx.loaded.model if ctx.loaded is not None else None
    if "timm" not in sys.modules or not _has_fused_timm_attention(model):
        return
    source = ctx.sources.read(ctx.target.path)
    call = timm_call(parse_python(source), ctx.target.symbol)
    if call is None:
        return
    yield FixCandidate(
        "timm:exportable", "Build the model with `exportable=True` (timm's attention as "
        "plain tensor operations)", "timm",
        keyword_edits(ctx.target.path, split_lines(source), call, {"exportable": "True"}))


def timm_call(tree: ast.Module, symbol: str) -> ast.Call | None:
    """The one ``timm.create_model(...)`` (or ``create_model(...)`` imported from timm) of the
    target's function; none when there are two: which one builds the target's model?"""
    function = _function(tree, symbol)
    if function is None:
        return None
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)
             and _named(node.func) in (("create_model", "timm"), ("create_model", ""))]
    return calls[0] if len(calls) == 1 else None


def _has_fused_timm_attention(model: object) -> bool:
    """Whether ``model`` holds one of timm's attention modules set to compute with
    ``F.scaled_dot_product_attention`` (``fused_attn``, off when built ``exportable``)."""
    modules = getattr(model, "modules", None)
    if not callable(modules):
        return False
    return any(type(module).__module__.startswith("timm.")
               and getattr(module, "fused_attn", False) is True for module in modules())


def _function(tree: ast.Module, symbol: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.name == symbol), None)


def config_call(tree: ast.Module, symbol: str) -> ast.Call | None:
    """The call in the target's function that builds the model's config (``LlamaConfig(...)``,
    ``AutoConfig.for_model(...)``), else one that builds the model from a checkpoint or a
    config (``from_pretrained``, ``from_config``): both take transformers' settings as
    keywords."""
    function = _function(tree, symbol)
    if function is None:
        return None
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
    configs = [call for call in calls if _builds_config(call.func)]
    models = [call for call in calls if _named(call.func)[0] in _MODEL_FACTORIES]
    found = configs or models
    return found[0] if len(found) == 1 else None  # two configs: which one is the model's?


def _named(func: ast.expr) -> tuple[str, str]:
    """A callee's name and what it is an attribute of (``AutoConfig.for_model``)."""
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        owner = func.value
        return func.attr, owner.id if isinstance(owner, ast.Name) else \
            owner.attr if isinstance(owner, ast.Attribute) else ""
    return "", ""


def _builds_config(func: ast.expr) -> bool:
    name, owner = _named(func)
    return name.endswith("Config") or (owner.endswith("Config") and name in _CONFIG_FACTORIES)
