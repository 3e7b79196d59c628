"""The default time limit bounds the model's own code, not the exporter's work
(docs/configuration.md, "The time limit"). With no timeout set, the load stage (the user's
code: importing it, building the model, its eager run) has a limit of its own, where an endless
loop or a wait is ONNX901. The exporter's work is not counted against it: an export call the
code makes while it loads (exporter/pipeline/intercepted_calls.py), and everything after the
model ran to its end, get the whole check's limit (a ceiling), so that a slow export is
answered, not cut short. Each time the whole limit takes over, ``lifted`` tells the worker,
which then kills the job at the whole limit instead (export_worker/process.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from exporter.pipeline import timers
from exporter.pipeline.timers import Alarm


class ModelCodeLimit:
    """The limit in force on a check: ``model_code`` seconds for the load stage, less the
    exporter's work inside it, then ``whole`` (None: no limit) from the check's start."""

    def __init__(self, alarm: Alarm, model_code: float | None, whole: float | None,
                 started: float, lifted: Callable[[], None] | None = None) -> None:
        self._alarm = alarm
        self._model_code = model_code
        self._whole = whole
        self._started = started
        self._lifted = lifted
        self._counting = model_code is not None  # the model's own code runs under its limit

    @property
    def in_force(self) -> float | None:
        """The limit a stop now would have reached."""
        return self._model_code if self._counting else self._whole

    def lift(self) -> None:
        """The model's own code ran to its end: the whole limit from now on."""
        if self._counting:
            self._counting = False
            self._tell_the_worker()
            self._set(self._whole_left())

    @contextmanager
    def exporter_working(self) -> Iterator[None]:
        """The exporter works inside the model's own code (an export call it makes): that
        time is the whole limit's, not the model code's."""
        if not self._counting:
            yield
            return
        left = self._alarm.remaining()
        self._counting = False
        self._tell_the_worker()
        self._set(self._whole_left())
        try:
            yield
        finally:
            self._counting = True
            whole = self._whole_left()
            self._set(left if whole is None else min(left, whole))

    @contextmanager
    def counting(self) -> Iterator[None]:
        """While the block runs (the load stage), an export call the user's code makes is
        the exporter's work (``timers.exporter_working``)."""
        with timers.exporters_work_not_counted(self.exporter_working):
            yield

    def _whole_left(self) -> float | None:
        return self._whole - (time.perf_counter() - self._started) if self._whole else None

    def _set(self, seconds: float | None) -> None:
        if seconds is None:
            self._alarm.cancel()
        else:
            self._alarm.set(seconds)

    def _tell_the_worker(self) -> None:
        if self._lifted is not None:
            self._lifted()
            self._lifted = None  # the worker's deadline only moves later, once
