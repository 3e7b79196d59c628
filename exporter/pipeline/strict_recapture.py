"""The draft export with every declared dimension strictly dynamic (``strictly_dynamic``): the
capture that names each guard torch added on a declared dimension, with the user's stack. Two
searches ask it: the capture stage's for the guard that narrowed a range (ONNX107, where the
capture's own guards do not say) and the dynamic stage's for the line that specialized a
dimension (ONNX102/ONNX403). On a large model one such draft export costs several times the
plain export (diffusers' UNet: ≈80 s against 18), so a check makes it once and both read its
report: the shortcut ``strict-recapture-once`` (``ONNXLENS_SHORTCUTS_OFF`` makes each search
capture again, as before)."""

from __future__ import annotations

import logging

import torch

from exporter.pipeline.context import CheckContext, StrictRecapture
from exporter.pipeline.example_inputs import fresh_copy
from exporter.pipeline.locating import strictly_dynamic
from exporter.toolchain import shortcuts, torch_compat

SHORTCUT = "strict-recapture-once"
Report = tuple[list[torch_compat.DraftFailure], dict[int, str]]


def strict_draft_report(ctx: CheckContext) -> Report | None:
    """The draft failures (and the files their stacks name) of the target's strict re-capture;
    made once per check while the shortcut is on."""
    if shortcuts.enabled(SHORTCUT) and ctx.strict_recapture is not None:
        return ctx.strict_recapture.report
    recapture = StrictRecapture(_recapture(ctx))
    ctx.strict_recapture = recapture
    return recapture.report


def _recapture(ctx: CheckContext) -> Report | None:
    loaded = ctx.need_loaded()
    try:
        spec = strictly_dynamic(loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes)
        args, kwargs = fresh_copy(loaded.args, loaded.kwargs)
        with torch_compat.onnx_exporting():
            program = torch.export.draft_export(loaded.model, args, kwargs,
                                                dynamic_shapes=spec, strict=False)
    except Exception:
        logging.getLogger(__name__).debug("the strict re-capture failed", exc_info=True)
        return None
    return torch_compat.draft_failures(program)
