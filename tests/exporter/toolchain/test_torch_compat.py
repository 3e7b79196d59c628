"""The torch layer: the public fallbacks do what torch.onnx.export does, and a user on an
untested or degraded torch is told so once (CLI stderr, JSON field). Every capability forced
off at once: tests/exporter/toolchain/test_capabilities_off.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from exporter import versions
from exporter.toolchain import speedups, torch_compat
from exporter.toolchain.shortcuts import IN_TORCH
from tests.conftest import REPO


@pytest.mark.parametrize("spec", [
    ({0: "batch"},),
    ({0: "batch", 1: "sequence"}, {"mask": {0: "batch"}}),
    [{0: "b"}, None, [None, "n"]],
    {"x": {0: "batch"}, "y": (None, "s")},
    ({0: torch.export.Dim("b")}, {1: "free"}),
    (None, None),
])
def test_string_dims_fall_back_to_what_torch_onnx_converts(spec, monkeypatch):
    from torch.onnx._internal.exporter import _dynamic_shapes

    monkeypatch.setenv(torch_compat.ENVIRONMENT_VARIABLE, "string-dims")
    assert torch_compat.dynamic_shapes_for_export(spec) == \
        _dynamic_shapes.convert_str_to_export_dim(spec)[0]


def test_walking_nested_values_falls_back_to_the_same_leaves(monkeypatch):
    nested = ((torch.ones(1), [torch.zeros(2), None]), {"a": torch.ones(3), "b": (4,)})
    with_pytree = torch_compat.tree_leaves(nested)
    mapped = torch_compat.tree_map(lambda leaf: leaf, nested)
    monkeypatch.setenv(torch_compat.ENVIRONMENT_VARIABLE, "pytree")
    assert not torch_compat.available("pytree")
    assert [id(leaf) for leaf in torch_compat.tree_leaves(nested) if leaf is not None] == \
        [id(leaf) for leaf in with_pytree if leaf is not None]
    assert repr(torch_compat.tree_map(lambda leaf: leaf, nested)) == repr(mapped)


_HELPERS = """\
import functools

import torch


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


class Model(torch.nn.Module):
    @torch.inference_mode()
    def helper(self, x):
        return torch.special.bessel_j0(x)

    @logged
    def middle(self, x):
        return self.helper(x) * 2

    @torch.no_grad()
    def forward(self, x):
        return self.middle(x) + 1
"""


def _traces(program: torch.export.ExportedProgram) -> list[str]:
    return [node.meta.get("stack_trace") or "" for module in program.graph_module.modules()
            if isinstance(module, torch.fx.GraphModule) for node in module.graph.nodes
            if node.op == "call_function" and "bessel" in str(node.target)]


def _import_helpers(tmp_path, monkeypatch):
    (tmp_path / "helpers_model.py").write_text(_HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    monkeypatch.delitem(sys.modules, "helpers_model", raising=False)
    return importlib.import_module("helpers_model")


def test_a_capture_keeps_every_user_frame_through_decorators(tmp_path, monkeypatch):
    """Issue 38: torch's non-strict tracer keeps only frames named `forward`; while
    keeping_user_frames runs, each frame of the files it accepts stays in the node's trace
    (torch's decorator frames, torch/utils/_contextlib.py, stay out), and torch's own anchor
    set is put back afterwards, with what torch registered meanwhile."""
    module = _import_helpers(tmp_path, monkeypatch)
    model, example = module.Model(), (torch.rand(2, 3),)
    path = str(tmp_path / "helpers_model.py")
    (plain,) = _traces(torch.export.export(model, example, strict=False))
    assert [line for line in plain.splitlines() if line.startswith("File")] == [
        f'File "{path}", line 25, in forward']
    from torch.fx import proxy

    anchors = proxy._STACK_TRACE_ANCHORS
    before = set(anchors)
    with torch_compat.keeping_user_frames(lambda filename: filename == path):
        proxy._register_stack_trace_anchor(_import_helpers)  # as torch's annotate_fn does
        (kept,) = _traces(torch.export.export(model, example, strict=False))
    frames = [line.strip() for line in kept.splitlines() if line.strip().startswith("File")]
    assert frames == [f'File "{path}", line 25, in forward',
                      f'File "{path}", line 9, in wrapper',
                      f'File "{path}", line 21, in middle',
                      f'File "{path}", line 17, in helper']
    assert proxy._STACK_TRACE_ANCHORS is anchors
    assert set(anchors) - before == {(__file__, "_import_helpers")}
    anchors.discard((__file__, "_import_helpers"))


def test_frames_on_the_stack_before_the_capture_are_not_the_models(tmp_path, monkeypatch):
    """A script of the workspace that runs a check is not the model's code: its frames stay
    out of the traces (this test's file stands for it)."""
    module = _import_helpers(tmp_path, monkeypatch)
    accepted = {__file__, str(tmp_path / "helpers_model.py")}
    with torch_compat.keeping_user_frames(lambda filename: filename in accepted):
        (kept,) = _traces(torch.export.export(module.Model(), (torch.rand(2, 3),),
                                              strict=False))
    assert "test_torch_compat.py" not in kept and "in helper" in kept


def test_without_the_capability_the_traces_are_torchs(tmp_path, monkeypatch):
    module = _import_helpers(tmp_path, monkeypatch)
    path = str(tmp_path / "helpers_model.py")
    monkeypatch.setenv(torch_compat.ENVIRONMENT_VARIABLE, "user-frames")
    with torch_compat.keeping_user_frames(lambda filename: filename == path):
        (trace,) = _traces(torch.export.export(module.Model(), (torch.rand(2, 3),),
                                               strict=False))
    assert "in helper" not in trace
    graph = torch.fx.symbolic_trace(torch.nn.ReLU())
    assert torch_compat.generated_code_file(graph) is None
    assert torch_compat.generated_code_node(graph, 1) is None


class _ExportPath(torch.nn.Module):
    def forward(self, x):
        return x + 1 if torch.onnx.is_in_onnx_export() else x - 1


def test_capture_traces_the_path_the_model_takes_under_torch_onnx_export():
    """torch.onnx.export sets the flag `is_in_onnx_export()` reads while it exports; the
    model's eager runs see it unset."""
    (attempt,) = torch_compat.capture(_ExportPath(), (torch.zeros(2),), {}, None)
    assert attempt.program is not None
    assert torch.equal(attempt.program.module()(torch.zeros(2)), torch.ones(2))
    assert not torch.onnx.is_in_onnx_export()
    program = torch.onnx.export(_ExportPath(), (torch.zeros(2),), dynamo=True, verbose=False)
    assert [node.op_type for node in program.model.graph] == ["Add"]


def test_without_the_capability_the_eager_path_is_captured(monkeypatch):
    monkeypatch.setenv(torch_compat.ENVIRONMENT_VARIABLE, "export-flag")
    with torch_compat.onnx_exporting():
        assert not torch.onnx.is_in_onnx_export()


def _caller_line(_: object) -> tuple[str, int]:
    caller = sys._getframe(1)
    return caller.f_code.co_filename, caller.f_lineno


def test_a_line_of_generated_code_names_the_node_it_runs():
    """What a re-traced node's `<eval_with_key>` frame ran: torch's line map of the graph
    module's code (translate.restore_user_stacks follows it to the captured node)."""
    graph = torch.fx.Graph()
    first = graph.call_function(_caller_line, (graph.placeholder("x"),))
    second = graph.call_function(_caller_line, (first,))
    graph.output((first, second))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    (file_one, line_one), (file_two, line_two) = module(None)
    assert torch_compat.generated_code_file(module) == file_one == file_two
    assert file_one.startswith("<eval_with_key>") and line_one != line_two
    assert torch_compat.generated_code_node(module, line_one) is first
    assert torch_compat.generated_code_node(module, line_two) is second


class _UntranslatableInBranches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def yes(t: torch.Tensor) -> torch.Tensor:
            return torch.cond(t.sum() > 0, torch.lgamma, torch.special.i0, (t,))

        return torch.cond(x.mean() > 0, yes, torch.neg, (x,)) + torch.digamma(x)


def test_untranslated_operators_are_found_in_control_flow_subgraphs_too():
    from torch.onnx._internal.exporter import _registration

    registry = _registration.ONNXRegistry.from_torchlib()
    program = torch.export.export(_UntranslatableInBranches(), (torch.randn(3, 2),))
    decomposed = torch_compat.decompose(program, registry)
    found = {str(node.meta.get("original_aten", node.target))
             for node in torch_compat.unsupported_nodes(decomposed, registry)}
    assert found == {"aten.lgamma.default", "aten.i0.default", "aten.digamma.default"}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom onnxlens.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=600)


def test_a_degraded_capability_is_said_once_on_stderr_and_in_json():
    run = _cli("check", "examples/mlp.py", "--format", "json",
               env={torch_compat.ENVIRONMENT_VARIABLE: "staged-translation"})
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("onnxlens:")]
    assert len(lines) == 1, run.stderr
    assert "degraded: the public torch.onnx.export translates" in lines[0]
    assert "[staged-translation: turned off by ONNXLENS_CAPABILITIES_OFF]" in lines[0]
    toolchain = json.loads(run.stdout)["toolchain"]
    assert toolchain["message"] == lines[0]
    assert toolchain["capabilities"]["staged-translation"].startswith("turned off")
    assert toolchain["packages"]["torch"] == torch.__version__


def test_a_tested_torch_checks_silently():
    run = _cli("check", "examples/mlp.py")
    assert run.returncode == 0
    assert not [line for line in run.stderr.splitlines() if line.startswith("onnxlens:")]


_UNTESTED = ("from exporter import versions\n"
             "versions.TESTED_TORCH = (versions.TorchRelease('1.0.0'),)")


def test_an_untested_torch_is_named_and_keeps_only_patches_that_give_the_same_onnx(tmp_path):
    # the CLI's export worker is a process of its own: the pretence starts with every
    # interpreter (sitecustomize), not only the CLI's
    (tmp_path / "sitecustomize.py").write_text(_UNTESTED + "\n")
    path = os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")])
    run = _cli("check", "examples/mlp.py", "--format", "json", env={"PYTHONPATH": path})
    assert run.returncode == 0, run.stderr
    message = (f"onnxlens: torch {torch.__version__} is not a version onnxlens is tested with "
               "(1.0.0); every capability passed its probe.")
    assert message in run.stderr.splitlines()
    toolchain = json.loads(run.stdout)["toolchain"]
    assert toolchain["torch_tested"] is False
    # on this torch every patch does give byte-identical ONNX: all were kept after comparing
    # (but those torch does itself, which are not applied)
    assert toolchain["speedups"] == {
        s.name: IN_TORCH if speedups._built_in(s) else "" for s in speedups.SPEEDUPS}


def test_a_patch_that_changes_the_onnx_is_dropped_on_an_untested_torch(session, monkeypatch):
    """The comparison catches a patch that changes the model (here: the producer version
    torch writes into it)."""
    from contextlib import contextmanager

    @contextmanager
    def other_producer():
        with monkeypatch.context() as patch:
            patch.setattr(torch, "__version__", "0.0.0-patched")
            yield

    changes = speedups.Speedup("changes-the-model", "tracing", lambda: None, other_producer)
    keeps = next(s for s in speedups.SPEEDUPS if s.name == "plain-list-attributes")
    monkeypatch.setattr(speedups, "SPEEDUPS", (changes, keeps))
    monkeypatch.setattr(speedups, "_UNVERIFIED", {"changes-the-model": "untested",
                                                  "plain-list-attributes": "untested"})
    monkeypatch.setattr(speedups.shortcuts, "SHORTCUTS",
                        {**speedups.shortcuts.SHORTCUTS, "changes-the-model": "test"})
    session.probe_toolchain()
    assert speedups.why_off(keeps) is None
    assert "exports to other ONNX" in speedups.why_off(changes)


def test_toolchain_lists_the_versions_and_what_is_on():
    run = _cli("toolchain")
    assert run.returncode == 0
    # torch's own log lines stay out (torch 2.15's console handler is no StreamHandler: its
    # registry's "torchvision is not installed" warnings reached the terminal)
    assert run.stderr == ""
    lines = run.stdout.splitlines()
    assert lines[0].startswith("onnxlens ")
    assert f"torch {torch.__version__}" in lines
    assert any(line.startswith("onnxruntime ") for line in lines)
    assert "capabilities on: " + ", ".join(torch_compat.CAPABILITIES) in lines
    built_in = [s.name for s in speedups.SPEEDUPS if speedups._built_in(s)]
    assert "speed patches on: " + ", ".join(s.name for s in speedups.SPEEDUPS
                                            if s.name not in built_in) in lines
    if built_in:  # torch 2.15 shares provenance records itself
        assert "speed patches done by torch itself: " + ", ".join(built_in) in lines


def test_the_install_plan_pins_the_recommended_torch_and_takes_cpu_wheels_on_linux():
    plan = versions.install_plan(["torch", "onnxruntime"], system="Linux")
    primary = versions.RECOMMENDED_TORCH.version
    assert primary == versions.TESTED_TORCH[-1].version  # the newest: what a new user gets
    assert plan.commands == [
        ["install", f"torch=={primary}", "--index-url", versions.CPU_INDEX_URL],
        ["install", "onnxruntime", f"torch=={primary}"]]
    assert plan.description == (f"pip will install torch {primary} (CPU build, from "
                                f"{versions.CPU_INDEX_URL}) and onnxruntime")
    assert versions.install_plan(["torch"], system="Darwin").commands == [
        ["install", f"torch=={primary}"]]
    assert versions.install_plan(["onnx"], system="Linux").commands == [["install", "onnx"]]


def test_this_torch_is_one_of_the_tested_versions():
    """Every CI leg runs a torch that exporter/versions.py lists."""
    assert versions.is_tested(torch.__version__)
    assert versions.is_tested("2.13.0+cpu") and versions.is_tested("2.14.1+cu130")
    assert versions.is_tested("2.15.0+cu132") and versions.is_tested("2.15.1")
    assert not versions.is_tested("2.16.0") and not versions.is_tested("2.1.0")
