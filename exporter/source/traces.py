"""Map stack traces (FX node metadata, ONNX node metadata, exceptions, draft-export reports)
back to the user's source: the innermost workspace frame is the primary location, the outer
workspace frames become the call chain, and the range is narrowed to the expression."""

from __future__ import annotations

import ast
import re
import sysconfig
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from exporter.findings.diagnostics import Location, Range, Related
from exporter.source.python_syntax import parse_python
from exporter.source.text import (
    LinesOf,
    char_column,
    node_range,
    source_lines,
    whole_line_range,
)

_FRAME_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')

# Aten op names whose Python spelling is an operator rather than a call.
_OPERATOR_NODES: dict[str, tuple[type, ...]] = {
    "add": (ast.Add,), "sub": (ast.Sub,), "rsub": (ast.Sub,), "mul": (ast.Mult,),
    "div": (ast.Div, ast.FloorDiv), "floor_divide": (ast.FloorDiv,), "remainder": (ast.Mod,),
    "matmul": (ast.MatMult,), "mm": (ast.MatMult,), "bmm": (ast.MatMult,),
    "pow": (ast.Pow,), "bitwise_and": (ast.BitAnd,), "bitwise_or": (ast.BitOr,),
    "bitwise_xor": (ast.BitXor,), "neg": (ast.USub,),
}


@dataclass(frozen=True)
class Frame:
    path: Path
    line: int
    function: str = ""
    column: int | None = None  # 0-based byte offset, when the traceback has one
    end_column: int | None = None


def parse_stack_trace(text: str | None) -> list[Frame]:
    """Parse ``File "x.py", line 3, in f`` frames, outermost first."""
    frames: list[Frame] = []
    for raw in (text or "").splitlines():
        match = _FRAME_LINE.match(raw)
        if match:
            frames.append(Frame(Path(match["path"]), int(match["line"]), match["func"] or ""))
    return frames


def exception_frames(error: BaseException) -> list[Frame]:
    """Frames of an exception's traceback, outermost first, with columns where known."""
    frames = []
    for summary in traceback.extract_tb(error.__traceback__):
        frames.append(Frame(
            Path(summary.filename), summary.lineno or 0, summary.name,
            getattr(summary, "colno", None), getattr(summary, "end_colno", None),
        ))
    return frames


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    # onnxlens's own packages (exporter, export_worker, lsp_server), never the user's code;
    # this module is exporter/source/traces.py
    checkout = Path(__file__).resolve().parents[2]
    roots.update(str(checkout / name) for name in ("exporter", "export_worker", "lsp_server"))
    return tuple(sorted(roots))


# Never the primary location, even from a source checkout inside the workspace.
_TOOLCHAIN_PACKAGES = {"torch", "onnxscript", "onnx", "onnxruntime", "onnx_ir"}


def is_library_path(path: Path) -> bool:
    """Installed packages, the standard library, the export toolchain, and onnxlens itself."""
    if "site-packages" in path.parts or "dist-packages" in path.parts:
        return True
    text = str(path)
    if any(text.startswith(root + "/") for root in _library_roots()):
        return True
    return _inside_toolchain_package(path.parent)


@lru_cache(maxsize=1024)
def _inside_toolchain_package(directory: Path) -> bool:
    for parent in (directory, *directory.parents):
        if parent.name in _TOOLCHAIN_PACKAGES and (parent / "__init__.py").is_file():
            return True
    return False


def is_user_frame(path: Path, workspace: Path) -> bool:
    """True for files inside the workspace that are not installed libraries or onnxlens."""
    if not path.is_absolute() or str(path).startswith("<") or is_library_path(path):
        return False
    try:
        path.resolve().relative_to(workspace.resolve())
    except ValueError:
        return False
    return path.is_file()


@dataclass(frozen=True)
class Mapped:
    location: Location
    related: tuple[Related, ...]
    # Where in a third-party library (e.g. transformers' modeling code) the problem is, for
    # the message: "in transformers/models/swin/modeling_swin.py:227, `window_partition`".
    library_note: str = ""


def map_frames(
    frames: Iterable[Frame], workspace: Path, *, hint: str | None = None,
    fallback: Location | None = None, lines_of: LinesOf = source_lines,
) -> Mapped | None:
    """Primary location = innermost user frame; related = the outer user frames, then the
    third-party library frames below it (innermost first). With no user frame but library
    frames, the primary location is ``fallback`` (the target: the user's call site)."""
    frames = list(frames)
    user_indices = [i for i, frame in enumerate(frames) if is_user_frame(frame.path, workspace)]
    below = frames[user_indices[-1] + 1:] if user_indices else frames
    library = [frame for frame in below if _third_party(frame.path) is not None]
    library_related = tuple(
        Related(Location(frame.path, whole_line_range(frame.path, frame.line, lines_of)),
                f"in `{frame.function}` ({_third_party(frame.path)}:{frame.line})")
        for frame in reversed(library))
    note = ""
    if library:
        inner = library[-1]
        note = f"in {_third_party(inner.path)}:{inner.line}, `{inner.function}`"
    if not user_indices:
        if not library or fallback is None:
            return None
        return Mapped(fallback, library_related, note)
    user = [frames[i] for i in user_indices]
    innermost = user[-1]
    location = Location(innermost.path, frame_range(innermost, hint, lines_of))
    related = tuple(
        Related(Location(frame.path, frame_range(frame, None, lines_of)),
                f"called from `{frame.function}`" if frame.function else "called from here")
        for frame in reversed(user[:-1])
    )
    return Mapped(location, library_related + related, note)


def _third_party(path: Path) -> str | None:
    """``transformers/models/x/modeling_x.py`` for a file of an installed package that is not
    the export toolchain or onnxlens; None for anything else."""
    parts = path.parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            inside = parts[parts.index(marker) + 1:]
            if inside and inside[0] not in _TOOLCHAIN_PACKAGES | {"exporter", "lsp_server"}:
                return "/".join(inside)
    return None


def frame_range(frame: Frame, hint: str | None, lines_of: LinesOf = source_lines) -> Range:
    """Narrow a frame's line to the expression most likely meant."""
    lines = lines_of(frame.path)
    if not 0 < frame.line <= len(lines):
        return Range.of(max(frame.line, 1), 1, max(frame.line, 1), 2)
    text = lines[frame.line - 1]
    if frame.column is not None and frame.end_column is not None \
            and frame.end_column > frame.column:
        start = char_column(text, frame.column)
        end = char_column(text, frame.end_column)
        if text[start:end].strip():
            return Range.of(frame.line, start + 1, frame.line, end + 1)
    narrowed = _narrow_by_ast(lines, frame.line, hint)
    return narrowed or whole_line_range(frame.path, frame.line, lines_of)


def _narrow_by_ast(lines: tuple[str, ...], line: int, hint: str | None) -> Range | None:
    statement = _statement_at(lines, line)
    if statement is None:
        return None
    focus = _statement_focus(statement)
    candidates = [node for node in ast.walk(focus) if getattr(node, "lineno", None) == line]
    if hint:
        chosen = _match_hint(candidates, hint)
        if chosen is not None:
            return node_range(chosen, lines)
    one_line = getattr(focus, "lineno", None) == line == getattr(focus, "end_lineno", None)
    if one_line and isinstance(statement, (ast.If, ast.While)):
        return node_range(focus, lines)  # the whole condition decides the branch
    calls = [node for node in candidates if isinstance(node, ast.Call)]
    if len(calls) == 1:
        return node_range(calls[0], lines)
    return node_range(focus, lines) if one_line else None


def _statement_focus(statement: ast.stmt) -> ast.AST:
    if isinstance(statement, (ast.If, ast.While)):
        return statement.test
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return statement.iter
    if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)):
        return statement.value or statement
    return statement


def _match_hint(nodes: list[ast.AST], hint: str) -> ast.AST | None:
    """Pick the call or operator whose spelling matches an aten op name like ``special_i0``."""
    op = hint.split("::")[-1].split(".")
    base = op[1] if len(op) > 1 and op[0] in ("aten", "prims") else op[0]
    base = base.lstrip("_").lower()
    operator_types = _OPERATOR_NODES.get(base.rstrip("_"), ())
    best: ast.AST | None = None
    for node in nodes:
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else "")
            callee = callee.lstrip("_").lower()
            matches = callee and (callee == base or base.endswith("_" + callee) or
                                  callee.endswith("_" + base) or base.startswith(callee + "_"))
            if matches and (best is None or _width(node) < _width(best)):
                best = node
        elif (operator_types and isinstance(node, (ast.BinOp, ast.UnaryOp, ast.AugAssign))
              and isinstance(node.op, operator_types) and best is None):
            best = node
    return best


def _width(node: ast.AST) -> int:
    return (node.end_col_offset or 0) - node.col_offset  # type: ignore[attr-defined]


@lru_cache(maxsize=64)
def _parsed(lines: tuple[str, ...]) -> ast.Module | None:
    try:
        return parse_python("\n".join(lines))
    except SyntaxError:
        return None


def _statement_at(lines: tuple[str, ...], line: int) -> ast.stmt | None:
    tree = _parsed(lines)
    if tree is None:
        return None
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            simple = not hasattr(node, "body") or node.lineno == line
            if simple and (best is None or node.lineno >= best.lineno):
                best = node
    return best
