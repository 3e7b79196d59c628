"""Source mapping: the innermost workspace frame, narrowed to the expression meant."""

from __future__ import annotations

import textwrap

from exporter.source.traces import Frame, map_frames, parse_stack_trace

SOURCE = textwrap.dedent("""\
    import torch


    def helper(x):
        return torch.special.i0(x) * 2 + torch.cos(x)


    def forward(x):
        if x.sum() > 0:
            x = x + 1
        y = helper(x)
        return y
""")


def _span(mapped):
    r = mapped.location.range
    return (mapped.location.path.name, r.start.line, r.start.column, r.end.line, r.end.column)


def test_innermost_workspace_frame_with_call_chain(tmp_path):
    (tmp_path / "model.py").write_text(SOURCE)
    site = tmp_path / ".venv" / "lib" / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "functional.py").write_text("def f():\n    pass\n")
    trace = (f'File "{tmp_path}/model.py", line 11, in forward\n    y = helper(x)\n'
             f'File "{tmp_path}/model.py", line 5, in helper\n    return ...\n'
             f'File "{site}/functional.py", line 2, in f\n    pass\n')
    mapped = map_frames(parse_stack_trace(trace), tmp_path, hint="aten.special_i0.default")
    assert _span(mapped) == ("model.py", 5, 12, 5, 31)  # torch.special.i0(x)
    (caller,) = mapped.related
    assert caller.message == "called from `forward`"
    assert (caller.location.range.start.line, caller.location.range.start.column,
            caller.location.range.end.column) == (11, 9, 18)  # helper(x)


def test_hints_pick_the_call_or_the_operator(tmp_path):
    (tmp_path / "model.py").write_text(SOURCE)
    frame = [Frame(tmp_path / "model.py", 5, "helper")]
    assert _span(map_frames(frame, tmp_path, hint="aten.cos.default")) == (
        "model.py", 5, 38, 5, 50)
    assert _span(map_frames(frame, tmp_path, hint="aten.mul.Tensor")) == (
        "model.py", 5, 12, 5, 35)
    branch = [Frame(tmp_path / "model.py", 9, "forward")]
    assert _span(map_frames(branch, tmp_path)) == ("model.py", 9, 8, 9, 19)  # x.sum() > 0


def test_toolchain_sources_inside_the_workspace_are_never_primary(tmp_path):
    package = tmp_path / "vendor" / "onnxscript"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text("x = 1\n")
    assert map_frames([Frame(package / "core.py", 1)], tmp_path) is None
    (tmp_path / "model.py").write_text(SOURCE)
    mapped = map_frames([Frame(tmp_path / "model.py", 12), Frame(package / "core.py", 1)],
                        tmp_path)
    assert _span(mapped) == ("model.py", 12, 12, 12, 13)


def test_files_outside_the_workspace_are_not_user_code(tmp_path):
    inside, outside = tmp_path / "ws", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (outside / "model.py").write_text(SOURCE)
    assert map_frames([Frame(outside / "model.py", 5)], inside) is None
