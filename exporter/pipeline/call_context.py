"""The context a ``torch.onnx.export`` call ran in (docs/export-calls.md): what its result
depends on beyond its arguments, as it was where the user's code made the call.

The plain exporter runs inside the caller's context: under ``@torch.inference_mode()``,
``torch.no_grad()`` or ``torch.autocast(...)``, with the default dtype and device the code set.
An export-call target's stages run later, after the user's function was unwound, and so
outside that context: a model built and run once under inference mode (yolov5's ``run()``)
exports inside it and fails outside it ("Inference tensors cannot be saved for backward").
So the context is recorded at the intercepted call (in the thread that made it) and entered
again around everything that runs the model: the eager forward and every later stage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch

#: the device types whose autocast state is recorded (``torch.amp.is_autocast_available``
#: says which the installed torch knows)
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "maia", "xla", "ipu",
                    "privateuseone")


@dataclass(frozen=True)
class Autocast:
    """``torch.autocast`` on for one device type, and the dtype it casts to."""

    device_type: str
    dtype: torch.dtype


@dataclass(frozen=True)
class CallContext:
    """Grad and inference mode, autocast (thread-local in torch), the default dtype and the
    default device (process-wide, or set by a ``with torch.device(...)`` block)."""

    grad_enabled: bool
    inference_mode: bool
    autocast: tuple[Autocast, ...]  # the device types it is on for
    autocast_cache: bool
    default_dtype: torch.dtype
    default_device: torch.device

    @classmethod
    def current(cls) -> CallContext:
        """The context of the calling thread, now."""
        return cls(torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
                   _autocast_states(), torch.is_autocast_cache_enabled(),
                   torch.get_default_dtype(), torch.get_default_device())

    def describe(self) -> list[str]:
        """What differs from torch's defaults, as the user wrote it (for the summary)."""
        found = []
        if self.inference_mode:  # which turns grad off
            found += ["torch.inference_mode()"] + (["torch.enable_grad()"]
                                                   if self.grad_enabled else [])
        elif not self.grad_enabled:
            found.append("torch.no_grad()")
        found += [f"torch.autocast({state.device_type!r}, dtype={state.dtype})"
                  for state in self.autocast]
        if self.default_dtype != torch.float32:
            found.append(f"torch.set_default_dtype({self.default_dtype})")
        if self.default_device != torch.device("cpu"):
            found.append(f"torch.set_default_device({str(self.default_device)!r})")
        return found

    @contextmanager
    def entered(self) -> Iterator[None]:
        """The block runs in this context; what differs from the current one is set, and
        set back afterwards (nothing is entered where nothing differs)."""
        now = CallContext.current()
        with ExitStack() as stack:
            if self.inference_mode != now.inference_mode:
                stack.enter_context(torch.inference_mode(self.inference_mode))
            # after inference mode, which turns grad off: `enable_grad()` inside it holds
            if self.grad_enabled != torch.is_grad_enabled():
                stack.enter_context(torch.set_grad_enabled(self.grad_enabled))
            wanted = {state.device_type: state for state in self.autocast}
            current = {state.device_type: state for state in now.autocast}
            for device_type in sorted(wanted.keys() | current.keys()):
                state = wanted.get(device_type)
                if state == current.get(device_type) and (
                        state is None or self.autocast_cache == now.autocast_cache):
                    continue
                stack.enter_context(torch.autocast(
                    device_type, dtype=state.dtype if state is not None else None,
                    enabled=state is not None, cache_enabled=self.autocast_cache))
            if self.default_dtype != now.default_dtype:
                torch.set_default_dtype(self.default_dtype)
                stack.callback(torch.set_default_dtype, now.default_dtype)
            if self.default_device != now.default_device:
                stack.enter_context(torch.device(self.default_device))
            yield


def _autocast_states() -> tuple[Autocast, ...]:
    states = []
    for device_type in AUTOCAST_DEVICES:
        try:
            if torch.amp.is_autocast_available(device_type) \
                    and torch.is_autocast_enabled(device_type):
                states.append(Autocast(device_type, torch.get_autocast_dtype(device_type)))
        except RuntimeError:  # a device type this torch does not know
            continue
    return tuple(states)
