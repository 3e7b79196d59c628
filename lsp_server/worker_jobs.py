"""What a forked check process does: one job (check, save or run) on one target.

Runs only inside the export worker (it imports torch through ``exporter``). Each job runs in
a fresh fork of the warm worker, so user modules start from scratch and a crash, a hang or a
memory blow-up takes down only that process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.context import Settings
from exporter.result import CheckResult
from exporter.serialize import diagnostic_to_data, result_to_data
from exporter.session import ExportSession
from exporter.sourcetext import set_overlay
from lsp_server.reuse import InputRecorder


def run_job(session: ExportSession, request: dict[str, Any]) -> dict[str, Any]:
    path = Path(request["file"])
    workspace = Path(request["workspace"])
    text, op = request.get("text"), request["op"]
    if text is not None:
        set_overlay(path, text)
    # What a check reads decides whether the server may reuse its result (lsp_server.reuse).
    recorder = InputRecorder(path if text is not None else None) if op == "check" else None
    settings = request.get("settings") or {}
    session.settings = Settings(opset=settings.get("opset"), atol=settings.get("atol"),
                                rtol=settings.get("rtol"))
    found = session.discover(path)
    target = next((t for t in found.targets if t.name == request["target"]), None)
    if target is None:
        return {"error": f"no export target {request['target']!r} in {path.name}"}
    context, target_result = session.run_target(target, workspace)
    result = CheckResult(targets=[target_result], files=[path])
    if recorder is not None:
        return {"result": result_to_data(result), "inputs": recorder.inputs()}
    if op == "save":
        return _save(context, result, request)
    if op == "run":
        return _run(context, target_result, request)
    return {"error": f"unknown job {op!r}"}


def _save(context: Any, result: CheckResult, request: dict[str, Any]) -> dict[str, Any]:
    from exporter.artifacts import DEFAULT_EXTERNAL_DATA_THRESHOLD, save_model

    errors = [diagnostic_to_data(d) for d in result.diagnostics if d.severity == "error"]
    if context.translated is None or context.weightless:
        return {"saved": False, "diagnostics": errors,
                "error": 'weights="none" models have no weights to save' if context.weightless
                else "the export failed; the file was not written"}
    threshold = request.get("threshold") or DEFAULT_EXTERNAL_DATA_THRESHOLD
    written = save_model(context.translated.onnx_program.model_proto, Path(request["output"]),
                         threshold)
    return {"saved": True, "written": [str(p) for p in written], "diagnostics": errors}


def _run(context: Any, target_result: Any, request: dict[str, Any]) -> dict[str, Any]:
    from exporter.run_report import build_run_report, format_run_report

    try:
        report = build_run_report(context, target_result, None, int(request.get("repeat", 20)))
    except Exception as error:
        return {"error": f"cannot run {context.target.name}: {error}",
                "diagnostics": [diagnostic_to_data(d) for d in target_result.diagnostics]}
    return {"report": report, "markdown": format_run_report(report)}
