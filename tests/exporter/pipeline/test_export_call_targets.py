"""A function marked with a pragma that calls torch.onnx.export (itself or through a helper of
its file): each call is a target, checked with that call's own arguments as the installed
torch interprets them; the other calls export as the plain exporter does, and nothing is
written (exporter/pipeline/intercepted_calls.py).
export_calls/legacy_script.py: the call at line 32 (through the helper ``save``, with
``dynamic_axes``) exports; the one at line 33 declares a batch dynamic that ``view(2, 12)``
fixes, and raises when run, so the one at line 36 is never reached.
Issue 38 (export_calls/earlier_programs.py, exported_files_read_back.py,
swallowed_failures.py, module_level_exports.py; each module's docstring says what it does):
the code after an earlier call uses what it returned and the files it wrote, the target's own
failure is its verdict wherever the script swallows it, and a check writes nothing.
Issue 38, item 7 (export_calls/call_context.py, converted_axes.py): each call is checked in
the context it was made in (inference and grad mode, autocast, default dtype, the modules'
modes), and a dimension torch's conversion of `dynamic_axes` made dynamic is not called
"declared dynamic"."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onnxlens.cli import main

pytestmark = pytest.mark.every_torch

SCRIPT = Path(__file__).parent / "export_calls" / "legacy_script.py"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    import contextlib
    import io
    import os

    workspace = tmp_path_factory.mktemp("export_calls")
    shutil.copy(SCRIPT, workspace / SCRIPT.name)
    (workspace / "pyproject.toml").write_text("")
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", SCRIPT.name, "--format", "json"])
    finally:
        os.chdir(cwd)
    return workspace, json.loads(out.getvalue())


def test_each_call_is_a_target_located_at_the_call(checked):
    _, report = checked
    assert [(t["name"], t["range"]["start"]["line"], t["range"]["start"]["column"])
            for t in report["targets"]] == [
        ("export_all@32", 32, 5), ("export_all@33", 33, 5), ("export_all@36", 36, 9)]


def test_the_calls_are_checked_as_torch_onnx_export_runs_them(checked):
    _, report = checked
    verdicts = {t["name"]: t["ok"] for t in report["targets"]}
    found = {(d["rule"], d["target"], d["range"]["start"]["line"])
             for d in report["diagnostics"] if d["target"]}
    assert verdicts == {"export_all@32": True, "export_all@33": False, "export_all@36": False}
    # the batch that `dynamic_axes` declared dynamic is fixed by `view(2, 12)`
    assert ("ONNX102", "export_all@33", 19) in found
    # the call at line 33 raises when run (as the plain exporter runs it), so the function
    # never gets to line 36: said at line 33
    assert ("ONNX003", "export_all@36", 33) in found
    stages = {t["name"]: {s["name"]: s["state"] for s in t["stages"]}
              for t in report["targets"]}
    assert stages["export_all@32"]["dynamic"] == "passed"  # the converted batch is dynamic


def test_nothing_is_written_where_the_calls_point(checked):
    workspace, _ = checked
    assert sorted(p.name for p in workspace.iterdir()) == ["legacy_script.py", "pyproject.toml"]


def test_the_verdicts_are_the_plain_exporters(tmp_path):
    """The same script run by plain Python: the call at line 32 writes its model, the one at
    line 33 raises."""
    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    run = subprocess.run([sys.executable, SCRIPT.name], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode != 0
    assert (tmp_path / "encoder.onnx").is_file()
    assert not (tmp_path / "flat.onnx").exists()
    assert f'{SCRIPT.name}", line 33, in export_all' in run.stderr


# -- issue 38: the calls that are not the target export as the plain exporter does, the
# target's own call is its verdict wherever the script swallows it, and nothing is written --

WORKSPACE_FILES = ("earlier_programs.py", "program_helpers.py", "exported_files_read_back.py",
                   "swallowed_failures.py", "module_level_exports.py", "export_on_import.py")
CHECKED_FILES = ("earlier_programs.py", "exported_files_read_back.py", "swallowed_failures.py",
                 "module_level_exports.py")
#: files the workspace holds before the check, with the names its scripts write: stale, so a
#: read that missed the check's copy would fail, and old, so a write would show in the mtime
STALE = ("enc.onnx", "module_level.onnx", "a.onnx.data")


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """``root`` and every file and directory under it: size, mtime (ns) and content (a
    directory's mtime changes when an entry is made or removed in it)."""
    return {path.relative_to(root).as_posix():
            (path.stat().st_size, path.stat().st_mtime_ns,
             path.read_bytes() if path.is_file() else b"")
            for path in [root, *sorted(root.rglob("*"))]}


@pytest.fixture(scope="module")
def issue_38(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict, Path]:
    """One check of the issue's scripts: the report, the workspace before and after, and the
    temporary directory the check ran with (where its scratch directories were)."""
    import contextlib
    import io
    import os

    workspace = tmp_path_factory.mktemp("issue_38")
    for name in WORKSPACE_FILES:
        shutil.copy(SCRIPT.parent / name, workspace / name)
    (workspace / "pyproject.toml").write_text("")
    (workspace / "out").mkdir()
    for name in (*STALE, "out/kept.txt"):
        (workspace / name).write_bytes(b"stale, not a model")
    for path in [workspace, *workspace.rglob("*")]:
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = snapshot(workspace)
    temporary = tmp_path_factory.mktemp("issue_38_tmp")
    out, cwd, saved_tmpdir = io.StringIO(), os.getcwd(), os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(temporary)  # the check's processes make their scratch there
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", *CHECKED_FILES, "--format", "json"])
    finally:
        os.chdir(cwd)
        if saved_tmpdir is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved_tmpdir
    return json.loads(out.getvalue()), before, snapshot(workspace), temporary


def findings(report: dict, target: str) -> list[tuple]:
    return [(d["rule"], d["severity"], d["path"], d["range"]["start"]["line"],
             d["range"]["start"]["column"], d["range"]["end"]["line"],
             d["range"]["end"]["column"]) for d in report["diagnostics"]
            if d["target"] == target]


def verdict(report: dict, target: str) -> bool:
    [found] = [t for t in report["targets"] if t["name"] == target]
    return found["ok"]


@pytest.mark.parametrize("target", [
    "optimize_then_save@36",  # p = export(...); p.optimize(); p.save(...), then the target
    "through_a_helper@43",  # a helper of the file returns the program; its model_proto read
    "from_another_file@50",  # a helper of another file exports, saves and returns it
    "in_a_thread@60",  # the earlier program made in a thread, saved after the join
    "earlier_raises_and_is_caught@75",  # the earlier export raises, `except Exception` goes on
    "export_again@43",  # the program a module-level call made: optimize(), names read
])
def test_an_earlier_call_exports_as_the_plain_exporter_and_the_target_is_reached(issue_38,
                                                                                target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


def test_the_program_an_earlier_call_returns_decides_a_branch(issue_38):
    """``if program is None:`` is not taken: the earlier call returned its program, so the
    call in the branch is not reached (not checked, not failed)."""
    report = issue_38[0]
    assert verdict(report, "branch_not_taken@82") is True
    assert findings(report, "branch_not_taken@82") == [
        ("ONNX005", "info", "earlier_programs.py", 82, 9, 82, 26)]
    [message] = [d["message"] for d in report["diagnostics"]
                 if d["target"] == "branch_not_taken@82"]
    assert message == ("The export call at line 82 is not checked: `branch_not_taken()` "
                       "returned without reaching it.")


@pytest.mark.parametrize("target", [
    "optimize_then_save@33", "through_a_helper@41", "in_a_thread@56", "branch_not_taken@80",
    "Tripling"])
def test_the_earlier_calls_are_targets_of_their_own(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


def test_an_earlier_call_that_raises_stops_the_function_there(issue_38):
    """As when run: the first export raises, the second call is never reached; said at the
    call that raised, not as a later line's NoneType error."""
    report = issue_38[0]
    assert verdict(report, "earlier_raises@66") is False
    assert findings(report, "earlier_raises@66") == [
        ("ONNX003", "error", "earlier_programs.py", 65, 5, 65, 62)]
    [message] = [d["message"] for d in report["diagnostics"]
                 if d["target"] == "earlier_raises@66"]
    assert message == ("An earlier torch.onnx.export call raised TorchExportError: Failed to "
                       "export the model with torch.export. `earlier_raises()` stops there, as "
                       "it does when run, and never reaches the export call at line 66.")
    # the call that raised is a target too, with its own failure
    assert [f[0] for f in findings(report, "earlier_raises@65")] == ["ONNX101"]


def test_a_call_whose_arguments_torch_refuses_is_said_to_be_that_call(issue_38):
    """The target's own call raises TypeError (an argument torch.onnx.export does not take):
    said as that call's failure, not as an earlier call's; the next call is never reached."""
    report = issue_38[0]
    messages = {d["target"]: d["message"] for d in report["diagnostics"]
                if d["target"].startswith("arguments_refused@")}
    assert findings(report, "arguments_refused@88") == [
        ("ONNX003", "error", "earlier_programs.py", 88, 5, 88, 87)]
    assert messages["arguments_refused@88"] == (
        "The torch.onnx.export call at line 88 does not take its arguments (TypeError: got an "
        "unexpected keyword argument 'fallback'): `arguments_refused()` stops there, as it "
        "does when run.")
    assert messages["arguments_refused@89"].startswith(
        "An earlier torch.onnx.export call raised TypeError: got an unexpected keyword "
        "argument 'fallback'")


@pytest.mark.parametrize("target", [
    "load_it@39",  # onnx.load of the exported file (a stale one sits in the workspace)
    "run_it@49",  # an ONNX Runtime session of it, run and compared
    "look_at_it@59",  # os.path.getsize/isfile, Path.exists/read_bytes, onnx.checker by path
    "with_external_data@69",  # ONNXProgram.save with external data, onnx.load reads both
    "absolute_and_saved_copy@79",  # an absolute path, open(); onnx.save's copy read back
])
def test_the_script_reads_the_file_it_just_exported(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


@pytest.mark.parametrize("target", [
    "bare_except@33", "base_exception@41", "plain_exception@49", "suppressed@57",
    "in_a_thread@62",  # a lambda run by a thread
    "in_a_pool@70",  # a lambda run by a pool, its future's exception read
    "through_a_helper@76",  # a helper of the file with a bare except
    "local_worker@84",  # a local function run by a thread, `except BaseException` in it
])
def test_the_targets_failure_is_its_verdict_wherever_the_script_swallows_it(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is False
    assert findings(report, target) == [
        ("ONNX101", "error", "swallowed_failures.py", 15, 12, 15, 23)]
    [message] = [d["message"] for d in report["diagnostics"] if d["target"] == target]
    assert message.startswith("`if x.sum() > 0:  # decided by the values: torch.export cannot "
                              "trace it` depends on the values inside a tensor")


@pytest.mark.parametrize("written, by", [
    ("module_level.onnx", "a module-level call (a stale file of that name stays as it was)"),
    ("module_level_saved.onnx", "ONNXProgram.save at module level"),
    ("module_level_onnx_save.onnx", "onnx.save at module level"),
    ("module_level_thread.onnx", "a module-level thread running torch.onnx.export"),
    ("helper_module.onnx", "the import of another file whose top level exports"),
    ("onnx_export_*.md", "report=True's report, in artifacts_dir (the working directory)"),
    ("a.onnx", "p.save() after an earlier call (a stale a.onnx.data stays as it was)"),
    ("elsewhere.onnx", "a helper of another file called by a function"),
    ("enc.onnx", "an earlier call of a function (a stale file of that name stays)"),
    ("wide.onnx.data", "external data written beside a saved model"),
    ("absolute.onnx", "an absolute path"),
    ("branching.onnx", "an earlier call that raised"),
])
def test_no_export_writes_into_the_workspace(issue_38, written, by):
    _, before, after, _ = issue_38
    assert sorted(Path(name).name for name in after if Path(name).match(written)) == sorted(
        Path(name).name for name in before if Path(name).match(written)), by
    assert {name: state for name, state in after.items() if Path(name).match(written)} == {
        name: state for name, state in before.items() if Path(name).match(written)}, by


def test_a_check_writes_nothing_into_the_workspace(issue_38):
    """Module-level exports (direct, ONNXProgram.save, onnx.save, report=True, a thread,
    another file's import), the earlier calls of every function: no file appears, and the
    stale files with the names the scripts write are left as they were."""
    report, before, after, _ = issue_38
    assert len(report["targets"]) == 35  # every target was checked
    assert after == before


def test_the_scratch_directories_are_removed(issue_38):
    temporary = issue_38[3]
    assert [p.name for p in temporary.iterdir() if p.name.startswith("onnxlens-exports-")] == []


# -- issue 38, item 7: each call is checked in its own context (export_calls/call_context.py,
# modelled on yolov5's export_onnx under @smart_inference_mode()), and a dimension that torch's
# conversion of `dynamic_axes` made dynamic is not called "declared dynamic"
# (export_calls/converted_axes.py, modelled on segment-anything's export script) --

CONTEXT = SCRIPT.parent / "call_context.py"
CONVERTED = SCRIPT.parent / "converted_axes.py"


@pytest.fixture(scope="module")
def item_7(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import contextlib
    import io
    import os

    workspace = tmp_path_factory.mktemp("item_7")
    for script in (CONTEXT, CONVERTED):
        shutil.copy(script, workspace / script.name)
    (workspace / "pyproject.toml").write_text("")
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", CONTEXT.name, CONVERTED.name, "--format", "json"])
    finally:
        os.chdir(cwd)
    return json.loads(out.getvalue())


def message(report: dict, target: str) -> str:
    [found] = [d["message"] for d in report["diagnostics"] if d["target"] == target]
    return found


@pytest.mark.parametrize("target, context, found", [
    # yolov5: run() under @smart_inference_mode() calls export_onnx(); the model and its
    # example were made, and run twice, under inference mode (its opset 12 stays 18)
    ("run@75", ["torch.inference_mode()"],
     [("ONNX203", "warning", "call_context.py", 75, 12, 75, 23)]),
    ("inference_mode_block@82", ["torch.inference_mode()"], []),  # `with inference_mode():`
    # grids built under inference mode, the call under `with torch.no_grad():`
    ("no_grad_block@100", ["torch.no_grad()"], []),
    # inference mode two helpers down, with no_grad between: the innermost holds
    ("nested_helpers@125", ["torch.inference_mode()"], []),
    ("under_autocast@163", ["torch.autocast('cpu', dtype=torch.float16)"], []),
    # set_default_dtype(float64) in a try whose `finally` sets it back while unwinding
    ("float64_default@178", ["torch.set_default_dtype(torch.float64)"], []),
    # model.train() with its BatchNorm frozen by a `with` block, which unfreezes it on exit
    ("training_with_frozen_norm@207", None, []),
])
def test_each_call_is_checked_in_its_own_context(item_7, target, context, found):
    """The plain exporter exports each of these inside its context and fails outside it
    (test_outside_its_context_each_call_fails); before, each got a false error."""
    assert findings(item_7, target) == found
    assert verdict(item_7, target) is True
    [summary] = [t["summary"] for t in item_7["targets"] if t["name"] == target]
    assert summary.get("call_context") == context


INFERENCE_TENSORS = ("torch.export failed: RuntimeError: Inference tensors cannot be saved for "
                     "backward. Please do not use Tensors created in inference mode in "
                     "computation tracked by autograd. To work around this, you can make a "
                     "clone to get a normal tensor and use it in autograd, or use "
                     "`torch.no_grad()` instead of `torch.inference_mode()`.")


@pytest.mark.parametrize("target, found, text", [
    # the thread a function starts under inference mode runs outside it (torch's modes are
    # the thread's): the call's context is its own thread's, and it fails, as when run
    ("in_a_thread@135", ("ONNX105", "error", "call_context.py", 39, 13, 39, 25),
     INFERENCE_TENSORS),
    # `with torch.inference_mode(False):` inside inference mode
    ("inference_mode_off@146", ("ONNX105", "error", "call_context.py", 39, 13, 39, 25),
     INFERENCE_TENSORS),
    # the weights too were made under inference mode: no_grad is not enough
    ("no_grad_loaded@109",
     ("ONNX105", "error", "call_context.py", 109, 9, 109, 26),
     "torch.export failed: RuntimeError: Setting requires_grad=True on inference tensor "
     "outside InferenceMode is not allowed."),
])
def test_a_call_outside_inference_mode_fails_as_when_run(item_7, target, found, text):
    assert verdict(item_7, target) is False
    assert findings(item_7, target) == [found]
    assert message(item_7, target) == text


OUTSIDE = """
import sys
import onnxruntime
import torch
sys.path.insert(0, sys.argv[1])
import call_context as w


def export_and_run(model, args):
    program = torch.onnx.export(model, args, dynamo=True)
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)})


def grids_from_inference_mode():
    model, im = w.Detect().eval(), torch.zeros(1, 3, 8, 8)
    w.warm_up(model, im)
    return model, (im,)


def made_in_float64():
    torch.set_default_dtype(torch.float64)
    made = w.Projection().eval(), (torch.randn(2, 3),)
    torch.set_default_dtype(torch.float32)
    return made


cases = {
    "loaded for inference": lambda: (lambda m, im: (m, (im,)))(*w.load_for_inference()),
    "grids from inference mode": grids_from_inference_mode,
    "float16 against float32": lambda: (w.HalfHead().eval(), (torch.randn(2, 4),)),
    "made in float64": made_in_float64,
    "training, norm not frozen": lambda: (w.Finetuned().train(), (torch.randn(1, 4),)),
}
for name, make in cases.items():
    try:
        export_and_run(*make())
        print("outcome:", name, "| exported")
    except Exception as error:
        print("outcome:", name, "| failed", type(error).__name__)
"""


def test_outside_its_context_each_call_fails(tmp_path):
    """The premise of the tests above, on the installed torch: the models of call_context.py
    exported (and run) outside the context their calls are made in fail with the plain
    exporter, at capture or in ONNX Runtime (the corpus runs them inside: they export)."""
    run = subprocess.run([sys.executable, "-c", OUTSIDE, str(CONTEXT.parent)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    outcomes = dict(line.removeprefix("outcome: ").split(" | ")
                    for line in run.stdout.splitlines() if line.startswith("outcome: "))
    assert outcomes == {"loaded for inference": "failed TorchExportError",
                        "grids from inference mode": "failed TorchExportError",
                        "float16 against float32": "failed Fail",  # ONNX Runtime's
                        "made in float64": "failed Fail",
                        "training, norm not frozen": "failed TorchExportError"}, run.stderr


def test_the_context_is_recorded_and_entered_again():
    """CallContext.current() at a call, entered() later: every part (the default device a
    `with torch.device(...)` block set too) holds inside, and nothing stays set after."""
    import torch

    from exporter.pipeline.call_context import Autocast, CallContext

    before = CallContext.current()
    with torch.inference_mode(), torch.enable_grad(), \
            torch.autocast("cpu", dtype=torch.float16), torch.device("meta"):
        torch.set_default_dtype(torch.float64)
        try:
            recorded = CallContext.current()
        finally:
            torch.set_default_dtype(torch.float32)
    assert recorded == CallContext(True, True, (Autocast("cpu", torch.float16),),
                                   before.autocast_cache, torch.float64, torch.device("meta"))
    assert recorded.describe() == ["torch.inference_mode()", "torch.enable_grad()",
                                   "torch.autocast('cpu', dtype=torch.float16)",
                                   "torch.set_default_dtype(torch.float64)",
                                   "torch.set_default_device('meta')"]
    with recorded.entered():
        assert CallContext.current() == recorded
        assert torch.zeros(1).device.type == "meta" and torch.zeros(1).is_inference()
    assert CallContext.current() == before
    with before.entered():  # nothing differs: nothing is entered
        assert CallContext.current() == before
    assert before.describe() == []


DECLARED_BY_POSITION = (
    "torch.onnx.export converts `dynamic_axes` by position, not by name: its entries in "
    "order, then the other `input_names`, go to `forward`'s inputs in order, so {}. Give "
    "`dynamic_shapes` keyed by `forward`'s parameter names instead.")


@pytest.mark.parametrize("target, found, text, argument", [
    # segment-anything: the entries name the points first, input_names every input in order
    ("segment_anything@40", [
        (("ONNX102", "error", "converted_axes.py", 22, 18, 22, 88),
         "`point_coords.shape[1]`, declared dynamic, is specialized or constrained here "
         "(guard `Eq(s55, 5)`): the exported graph would only accept the example size."),
        (("ONNX102", "error", "converted_axes.py", 24, 21, 24, 65),
         "`image_embeddings.shape[1]`, dynamic (only because torch's conversion of "
         "`dynamic_axes` gave `image_embeddings` the entry `'point_coords': {1: "
         "'num_points'}`), is specialized or constrained here (guard `Eq(s49, 8)`): the "
         "exported graph would only accept the example size.")],
     "`image_embeddings` got `'point_coords': {1: 'num_points'}` and `point_labels` got no "
     "dynamic axis instead of `'point_labels': {1: 'num_points'}`", (43, 23, 43, 48)),
    # only the second input has an entry: the first gets it
    ("second_input_only@64", [
        (("ONNX102", "error", "converted_axes.py", 58, 16, 58, 25),
         "`x.shape[0]`, dynamic (only because torch's conversion of `dynamic_axes` gave `x` "
         "the entry `'scale': {0: 'batch'}`), is specialized or constrained here (guard "
         "`Eq(s77, 2)`): the exported graph would only accept the example size.")],
     "`x` got `'scale': {0: 'batch'}` and `scale` got no dynamic axis instead of `'scale': "
     "{0: 'batch'}`", (65, 51, 65, 87)),
    # input_names in another order than forward's parameters
    ("names_in_another_order@81", [
        (("ONNX102", "error", "converted_axes.py", 74, 16, 74, 37),
         "`features.shape[1]`, dynamic (only because torch's conversion of `dynamic_axes` "
         "gave `features` (`input_names`: `'bias'`) the entry `'features': [1]`), is "
         "specialized or constrained here (guard `Eq(s65, 6)`): the exported graph would "
         "only accept the example size.")],
     "`features` (`input_names`: `'bias'`) got `'features': [1]` and `bias` (`input_names`: "
     "`'features'`) got no dynamic axis instead of `'features': [1]`", (82, 57, 82, 87)),
    # input_names shorter than forward's parameters, the entries in another order: both
    # dimensions of the guard are declared (each input's `seq` by the other's entry)
    ("fewer_input_names@97", [
        (("ONNX102", "error", "converted_axes.py", 91, 16, 91, 55),
         "`tokens.shape[1]`, `mask.shape[1]`, declared dynamic, is specialized or "
         "constrained here (guard `Eq(s27, s64)`): the exported graph would only accept the "
         "example size.")],
     "`tokens` got `'mask': {1: 'seq'}` instead of `'tokens': {0: 'batch', 1: 'seq'}` and "
     "`mask` got `'tokens': {0: 'batch', 1: 'seq'}` instead of `'mask': {1: 'seq'}`",
     (99, 23, 99, 90)),
    # the dimension the conversion made dynamic is narrowed by the model's guard (ONNX107)
    ("narrowed_by_conversion@112", [
        (("ONNX107", "error", "converted_axes.py", 104, 12, 104, 26),
         "`n` (`x.shape[1]`) is dynamic (only because torch's conversion of `dynamic_axes` "
         "gave `x` the entry `'y': {1: 'n'}`) over [2, ∞), but the exported graph is valid "
         "only for [5, ∞): torch.onnx.export narrowed the range to the guard `x.shape[1] > "
         "4` here without an error, and the ONNX model does not check it.")],
     "`x` got `'y': {1: 'n'}` and `y` got no dynamic axis instead of `'y': {1: 'n'}`",
     (113, 47, 113, 75)),
])
def test_a_dimension_the_conversion_made_dynamic_is_not_called_declared(item_7, target, found,
                                                                       text, argument):
    """Each finding on a dimension of the call says which entry the conversion gave which
    input (and a dimension dynamic only by that is not "declared dynamic"), with the call's
    `dynamic_axes=` argument as a related location."""
    assert verdict(item_7, target) is False
    assert findings(item_7, target) == [where for where, _ in found]
    diagnostics = [d for d in item_7["diagnostics"] if d["target"] == target]
    for diagnostic, (where, stated) in zip(diagnostics, found):
        expected = f"{stated} {DECLARED_BY_POSITION.format(text)}"
        if where[0] == "ONNX107":  # then what the run below the narrowed range showed
            expected += (" Confirmed at n=2 (the lower bound of the declared range): Output "
                         "`add` differs from PyTorch")
        assert diagnostic["message"].startswith(expected)
        assert diagnostic["message"] == expected or where[0] == "ONNX107"
        related = diagnostic["related"][0]
        assert (related["path"], related["message"]) == (
            "converted_axes.py", "the `dynamic_axes` torch.onnx.export converted by position")
        assert (related["range"]["start"]["line"], related["range"]["start"]["column"],
                related["range"]["end"]["line"], related["range"]["end"]["column"]) == argument


def test_dynamic_axes_in_forwards_order_are_declared(item_7):
    """The same entries in `forward`'s order: each input gets its own, nothing to say."""
    assert verdict(item_7, "in_forward_order@49") is True
    assert findings(item_7, "in_forward_order@49") == []


def test_a_script_that_inspects_the_exporter_sees_it_as_without_the_check(tmp_path, capsys,
                                                                          monkeypatch):
    """timm's ``onnx_export`` asks ``inspect.signature(torch.onnx.export)`` for
    ``dynamic_shapes`` and raised under the check (ONNX003), whose stand-in took ``*args,
    **kwargs``. Five scripts that look at the exporter (its signature, its argspec through a
    `from` import, its module and docstring under two decorators, ``ONNXProgram.save``'s
    signature in a method, ``onnx.save_model``'s) reach their calls, and write nothing."""
    script = tmp_path / "introspected_exports.py"
    shutil.copy(SCRIPT.parent / script.name, script)
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", script.name, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {t["name"]: t["ok"] for t in report["targets"]} == {
        "by_signature@28": True, "by_argspec@39": True, "by_name@57": True,
        "by_method@81": True, "by_saver@86": True, "by_saver@90": True}
    assert report["diagnostics"] == []
    assert snapshot(tmp_path) == before


def test_a_call_made_by_another_files_helper_is_the_functions_target(tmp_path, capsys,
                                                                     monkeypatch):
    """timm's ``onnx_export.py`` exports through ``timm.utils.onnx.onnx_export``: a pragma's
    function with no inputs that returns nothing was ONNX001 ("no example inputs") after
    running the helper's export as any other call. Now the first call it reaches is its
    target, whatever the helper (a function, a method, through two decorators, the first
    of a loop), and a failure in the model is located in the model; a function that makes
    no call is still ONNX001, at its pragma, saying so."""
    for name in ("helper_exports.py", "export_library.py"):
        shutil.copy(SCRIPT.parent / name, tmp_path / name)
    (tmp_path / "nothing.py").write_text(
        "import torch\n\n\n# onnx-export:\ndef exports_nothing():\n"
        "    torch.nn.Linear(2, 2)(torch.randn(1, 2))\n")
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "helper_exports.py", "nothing.py", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {t["name"]: t["ok"] for t in report["targets"]} == {
        "timm_like": True, "decorated": True, "first_of_a_loop": True, "by_a_method": False,
        "exports_nothing": False}
    assert findings(report, "by_a_method") == [
        ("ONNX101", "error", "helper_exports.py", 25, 12, 25, 23)]
    (nothing,) = [d for d in report["diagnostics"] if d["target"] == "exports_nothing"]
    assert (nothing["rule"], nothing["path"], nothing["range"]["start"]["line"]) == (
        "ONNX001", "nothing.py", 4)
    assert nothing["message"].startswith("`exports_nothing` has no example inputs and made no "
                                         "torch.onnx.export call")
    assert snapshot(tmp_path) == before


def test_a_scripts_entry_point_is_checked_as_the_script_runs_it(tmp_path, capsys, monkeypatch):
    """export_calls/script_entry_points.py: a marked function whose parameters all have
    defaults is called with none, a click command takes its options from the command line,
    and code that parses the command line sees the one of ``python script_entry_points.py``
    (no options, its path in ``sys.argv[0]``), not the worker's. Before, the first were
    ONNX001 "no example inputs", the others ONNX003 "raised SystemExit"; now each verdict is
    the call's, located in the model."""
    name = "script_entry_points.py"
    shutil.copy(SCRIPT.parent / name, tmp_path / name)
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", name, "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {t["name"]: t["ok"] for t in report["targets"]} == {
        "main@52": True, "convert@58": False, "command_line@65": True, "with_argv@74": False,
        "every_width@80": True, "command@88": False}
    assert findings(report, "convert@58") == [("ONNX102", "error", name, 34, 17, 34, 36)]
    for target in ("with_argv@74", "command@88"):
        assert findings(report, target) == [("ONNX101", "error", name, 40, 12, 40, 23)]
    assert snapshot(tmp_path) == before
