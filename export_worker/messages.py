"""The messages between a client (the CLI, the language server) and the export worker.

One JSON object per line, ``{"type": <class name>, ...fields}``, read and written only by
``encode`` and ``decode`` (docs/architecture.md, "The worker protocol"). Requests go to the
worker's stdin, events come back on its stdout.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from exporter.config.options import ExportOptions
from exporter.findings.diagnostics import Diagnostic
from exporter.findings.result import CheckResult
from exporter.reports.graph_view import GraphFiles
from exporter.reports.run import RunReport
from exporter.reports.serialize import (
    diagnostic_from_data,
    diagnostic_to_data,
    export_target_from_data,
    export_target_to_data,
    result_from_data,
    result_to_data,
)
from exporter.source.notebooks import CellSource
from exporter.source.targets import Target
from exporter.toolchain.report import ToolchainReport

JobKind = Literal["check", "save", "run", "graph"]
#: the worker's exit status when it must fork no more jobs (the installed packages changed
#: under its warm imports, or importing them changed global state a check can observe): the
#: client starts a new worker and runs the job there (export_worker/warm_imports.py)
RESTART_STATUS = 75  # EX_TEMPFAIL
#: why a job has no answer: killed at its deadline, past its memory limit, its process died,
#: cancelled by the client, or the worker itself went away while the job ran
FailureKind = Literal["timeout", "memory", "crashed", "cancelled", "worker-lost"]


# -- client → worker -------------------------------------------------------------------------

@dataclass(frozen=True)
class JobRequest:
    """Check, save or run one export target, or write its graph (docs/graph.md), in a fresh
    fork of the warm worker."""

    kind: JobKind
    #: as the front end found it in ``text`` (or the file): the worker does not look for it
    #: again
    target: Target
    workspace: str
    text: str | None = None  # the editor's unsaved text; None: the file on disk
    #: a notebook's code cells when ``text`` is their module (targets are named by cell)
    notebook_cells: list[CellSource] = field(default_factory=list)
    settings: ExportOptions = field(default_factory=ExportOptions)
    timeout: float | None = None  # seconds; None: no limit
    #: seconds the model's own code (building it, its eager run: the load stage) may take,
    #: when fewer than ``timeout``: the default limit, which lets the exporter answer
    load_timeout: float | None = None
    memory_limit_mb: int | None = None
    record_inputs: bool = False  # for the server's result reuse (export_worker/inputs.py)
    output: str | None = None  # save: where; graph: the directory its files go to
    threshold: int | None = None  # save: external data from this size on
    #: save: without the exporter's stack traces and absolute paths (a model that will ship)
    strip_source_metadata: bool = False
    repeat: int = 20  # run: timed runs
    model: str | None = None  # run: this saved .onnx instead of the export
    #: check: report what the capture and translate stages found as soon as each ends
    #: (``JobProgress``), before the answer
    progress: bool = False
    id: str = ""  # set by the client


@dataclass(frozen=True)
class Cancel:
    job: str


@dataclass(frozen=True)
class StatusQuery:
    id: str


@dataclass(frozen=True)
class Shutdown:
    pass


# -- worker → client -------------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    pid: int
    seconds: float
    toolchain: ToolchainReport
    warnings: list[str] = field(default_factory=list)  # e.g. unknown names in ONNXLENS_* vars


@dataclass(frozen=True)
class Missing:
    """The worker cannot import the export toolchain; it exits after saying so."""

    detail: str


@dataclass(frozen=True)
class JobInputs:
    """What a check read that decides whether its result may be reused
    (export_worker/inputs.py, lsp_server/reuse.py)."""

    modules: dict[str, str]  # each Python file read from outside the installed packages: its
    # content's sha256


# What a job process computed: one answer type per job kind (``kind`` tells them apart in
# the JSON), and ``JobError`` for a job that could not do what was asked.

@dataclass(frozen=True)
class CheckAnswer:
    """A check's result, and what it read (for the server's result reuse)."""

    result: CheckResult
    inputs: JobInputs | None = None  # with record_inputs; None: not reusable
    kind: Literal["check"] = "check"


@dataclass(frozen=True)
class SaveAnswer:
    """Whether the checked model was saved: the files written, or why not (``error``); the
    check's errors either way."""

    saved: bool
    written: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    kind: Literal["save"] = "save"


@dataclass(frozen=True)
class RunAnswer:
    """The run report (and its markdown), or why there is none with the check's findings."""

    report: RunReport | None = None
    markdown: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    kind: Literal["run"] = "run"


@dataclass(frozen=True)
class GraphAnswer:
    """The check's result and its graph's files; ``graph`` None: no ONNX model (``error``)."""

    result: CheckResult
    graph: GraphFiles | None = None
    error: str | None = None
    kind: Literal["graph"] = "graph"


@dataclass(frozen=True)
class JobError:
    """The job could not do what was asked (no such target; ``internal``: an onnxlens bug)."""

    error: str
    internal: bool = False
    kind: Literal["error"] = "error"


JobAnswer = CheckAnswer | SaveAnswer | RunAnswer | GraphAnswer | JobError


@dataclass(frozen=True)
class JobDone:
    id: str
    answer: JobAnswer
    seconds: float
    pid: int
    peak_rss_mb: int = 0
    #: installed top-level packages the job imported that the worker had not (warm_imports)
    library_imports: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JobProgress:
    """What a check found so far (``result``: one target); its answer follows."""

    id: str
    result: CheckResult


@dataclass(frozen=True)
class JobFailed:
    id: str
    failure: FailureKind
    detail: str = ""
    seconds: float = 0.0
    peak_rss_mb: int = 0


@dataclass(frozen=True)
class JobProcess:
    id: str
    pid: int


@dataclass(frozen=True)
class SpareProcess:
    pid: int
    warm: bool


@dataclass(frozen=True)
class WorkerStatus:
    id: str
    pid: int
    jobs: list[JobProcess]
    spare: SpareProcess | None
    toolchain: ToolchainReport
    warm_imports: list[str] = field(default_factory=list)  # imported ahead of the checks


Request = JobRequest | Cancel | StatusQuery | Shutdown
Event = Ready | Missing | JobProgress | JobDone | JobFailed | WorkerStatus
Message = Request | Event
JobOutcome = JobDone | JobFailed

_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    JobRequest, Cancel, StatusQuery, Shutdown, Ready, Missing, JobProgress, JobDone,
    JobFailed, WorkerStatus)}


class DecodeError(ValueError):
    """A line that is not a message of this protocol."""


#: field types with a JSON form of their own: check results and targets keep their ranges,
#: paths and rules as exporter/reports/serialize.py writes and reads them (the one converter)
_CODECS: dict[type, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    CheckResult: (result_to_data, result_from_data),
    Diagnostic: (diagnostic_to_data, diagnostic_from_data),
    Target: (export_target_to_data, export_target_from_data),
}


def encode(message: Message) -> bytes:
    return json.dumps({"type": type(message).__name__, **_data(message)}).encode() + b"\n"


def _data(value: Any) -> Any:
    """``value`` as JSON data: a dataclass field by field, a result by its codec."""
    codec = _CODECS.get(type(value))
    if codec is not None:
        return codec[0](value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_data(item) for item in value]
    if isinstance(value, dict):
        return {key: _data(item) for key, item in value.items()}
    return value


def decode(line: bytes | str) -> Message:
    try:
        data = json.loads(line)
        cls = _TYPES[data.pop("type")]
        message: Message = _build(cls, data)
        return message
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise DecodeError(f"not a worker message: {str(line)[:200]!r} ({error})") from None


def _build(cls: type, data: dict[str, Any]) -> Any:
    hints = _hints(cls)
    unknown = set(data) - set(hints)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    return cls(**{name: _value(hints[name], value) for name, value in data.items()})


def _value(hint: Any, value: Any) -> Any:
    """Nested dataclasses and results (also in ``X | None`` and ``list[X]``) from their
    JSON data."""
    if value is None:
        return None
    if hint in _CODECS:
        return _CODECS[hint][1](value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value)
    origin, args = get_origin(hint), get_args(hint)
    if origin is list and args and (args[0] in _CODECS or dataclasses.is_dataclass(args[0])):
        return [_value(args[0], item) for item in value]
    if origin is tuple:  # JSON has lists only; a frozen dataclass's tuple stays hashable
        return tuple(value)
    if origin in (Union, types.UnionType):
        tagged = {_kind(arg): arg for arg in args if _kind(arg) is not None}
        if tagged:  # the job answers: the one its ``kind`` names
            return _build(tagged[value["kind"]], value)
        for arg in args:
            if arg in _CODECS or dataclasses.is_dataclass(arg):
                return _value(arg, value)
    return value


def _kind(cls: Any) -> str | None:
    """The ``kind`` tag of a job answer class (None: not one)."""
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        return None
    tag = next((f.default for f in dataclasses.fields(cls) if f.name == "kind"), None)
    return tag if isinstance(tag, str) else None


@cache
def _hints(cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: hint for name, hint in get_type_hints(cls).items() if name in names}


def answer_to_bytes(answer: JobAnswer, library_imports: list[str]) -> bytes:
    """The answer's lines on a job's pipe: the library modules the job imported (the worker's
    warm imports learn them, and they reach the client on ``JobDone``), then the answer
    itself, which the worker forwards as it is (``done_to_bytes``)."""
    return (b"I" + json.dumps(library_imports).encode() + b"\n"
            + b"A" + json.dumps(_data(answer)).encode() + b"\n")


def progress_to_bytes(result: CheckResult) -> bytes:
    """A progress line on a job's pipe, before its answer (forwarded by ``progress_frame``)."""
    return b"P" + json.dumps(_data(result)).encode() + b"\n"


def if_stopped_to_bytes(result: CheckResult) -> bytes:
    """A line on a job's pipe: the result that stands if the job is stopped from now on (the
    export is known to fail); the worker answers with it when it kills the job at its time
    limit (``stopped_answer``)."""
    return b"K" + json.dumps(_data(result)).encode() + b"\n"


#: a line on a job's pipe: the model's own code ran to its end, or the exporter works inside
#: it: its time limit is now ``JobRequest.timeout`` (exporter/pipeline/model_code_limit.py)
WHOLE_LIMIT_LINE = b"L{}\n"


def stopped_answer(result: bytes) -> bytes:
    """The ``CheckAnswer`` JSON of a job killed at its time limit after its verdict was
    known: the result it wrote (``if_stopped_to_bytes``)."""
    return b'{"result": ' + result + b', "kind": "check"}'


def done_to_bytes(job_id: str, answer: bytes, seconds: float, pid: int,
                  peak_rss_mb: int, library_imports: list[str] | None = None) -> bytes:
    """``encode(JobDone(...))`` around an answer the job encoded (``answer_to_bytes``): the
    worker forwards a job's answer without decoding and encoding it again."""
    head = {"type": "JobDone", "id": job_id}
    tail = {"seconds": seconds, "pid": pid, "peak_rss_mb": peak_rss_mb,
            "library_imports": library_imports or []}
    return _spliced(head, "answer", answer, tail)


def progress_frame(job_id: str, result: bytes) -> bytes:
    """``encode(JobProgress(...))`` around a result the job encoded (``progress_to_bytes``)."""
    return _spliced({"type": "JobProgress", "id": job_id}, "result", result, {})


def _spliced(head: dict[str, Any], key: str, value: bytes, tail: dict[str, Any]) -> bytes:
    """One JSON object: ``head``'s fields, ``key`` with ``value`` (JSON already), ``tail``'s."""
    fields = [json.dumps(head)[1:-1].encode(), json.dumps(key).encode() + b": " + value]
    if tail:
        fields.append(json.dumps(tail)[1:-1].encode())
    return b"{" + b", ".join(fields) + b"}\n"


@dataclass
class JobOutput:
    """What a job process wrote to its pipe, read line by line: progress, then the answer,
    each the JSON the job wrote (checked to be a JSON object, not decoded into types)."""

    progress: list[bytes] = field(default_factory=list)
    if_stopped: bytes | None = None
    answer: bytes | None = None
    library_imports: list[str] = field(default_factory=list)
    whole_limit: bool = False
    malformed: bool = False


def read_job_lines(buffer: bytearray) -> JobOutput:
    """Take the whole lines out of ``buffer`` (what is left is a line still being written)."""
    output = JobOutput()
    while (end := buffer.find(b"\n")) >= 0:
        line = bytes(buffer[:end])
        del buffer[:end + 1]
        kind, payload = line[:1], line[1:]
        try:
            data = json.loads(payload)
        except ValueError:
            output.malformed = True
            continue
        if kind == b"I" and isinstance(data, list) and all(isinstance(m, str) for m in data):
            output.library_imports = data
        elif kind == b"P" and isinstance(data, dict):
            output.progress.append(payload)
        elif kind == b"K" and isinstance(data, dict):
            output.if_stopped = payload
        elif kind == b"A" and isinstance(data, dict):
            output.answer = payload
        elif kind == b"L" and data == {}:
            output.whole_limit = True
        else:
            output.malformed = True
    return output
