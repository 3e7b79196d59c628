"""A command's arguments (lsp_server/commands.py): what the client sent, as the command's
typed arguments, or an error that names the argument; the commands themselves run over stdio
in test_features.py and test_graph.py."""

from __future__ import annotations

import pytest

from lsp_server.commands import (
    LineArguments,
    RunArguments,
    SarifArguments,
    SaveArguments,
    parsed,
)


def test_the_values_become_the_fields_in_order_with_the_defaults():
    assert parsed(("file:///m.py",), RunArguments) == RunArguments("file:///m.py", None, 20)
    assert parsed(("file:///m.py", "Model", 3), RunArguments) == \
        RunArguments("file:///m.py", "Model", 3)
    # a client that sends the list as the one argument
    assert parsed((["file:///m.py", "Model", "out.onnx"],), SaveArguments) == \
        SaveArguments("file:///m.py", "Model", "out.onnx")
    assert parsed((), SarifArguments) == SarifArguments(None)
    assert parsed(("file:///m.py", None, None), SaveArguments).output is None


@pytest.mark.parametrize("args, kind, message", [
    ((), LineArguments, "expected the arguments uri, line; uri is missing"),
    (("file:///m.py",), LineArguments, "expected the arguments uri, line; line is missing"),
    (("file:///m.py", "4"), LineArguments, "argument 2 (line) must be int, not str"),
    (("file:///m.py", True), LineArguments, "argument 2 (line) must be int, not bool"),
    ((7,), RunArguments, "argument 1 (uri) must be str, not int"),
    (("file:///m.py", "Model", "twenty"), RunArguments,
     "argument 3 (repeat) must be int, not str"),  # it ran 20 times without a word
    (("file:///m.py", 3), SaveArguments, "argument 2 (target) must be str or null, not int"),
    (("a.sarif", "b.sarif"), SarifArguments, "expected at most 1 arguments (path), got 2"),
])
def test_a_missing_extra_or_mistyped_argument_is_named(args, kind, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parsed(args, kind)


async def test_apply_edit_takes_the_edit_a_command_carries():
    """A client without code-action literals gets each quick fix as an ``onnxlens.applyEdit``
    command whose argument is the edit (lsp_server/presentation.py); running it applies that
    edit."""
    from lsprotocol import types
    from lsprotocol.converters import get_converter

    from lsp_server.commands import apply_edit

    edit = types.WorkspaceEdit(changes={"file:///m.py": [types.TextEdit(
        range=types.Range(types.Position(3, 0), types.Position(3, 0)), new_text="#\n")]})
    applied: list[types.WorkspaceEdit] = []

    class Client:
        async def workspace_apply_edit_async(self, params):
            applied.append(params.edit)
            return types.ApplyWorkspaceEditResult(applied=True)

    assert await apply_edit(Client(), get_converter().unstructure(edit)) is True
    (done,) = applied
    assert get_converter().unstructure(done) == get_converter().unstructure(edit)
    with pytest.raises(ValueError, match="expected a WorkspaceEdit"):
        await apply_edit(Client(), "file:///m.py")
