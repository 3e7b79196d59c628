"""One target's export options, resolved once: the run's defaults (``ExportOptions``: the
project's settings), overridden at load by the pragma's values (evaluated in the module), an
exportable module's methods, or the intercepted export call's arguments. Stages read fields,
never keys; which keys were given is kept for what depends on it (a pragma's
``dynamic_shapes=None`` is not the same as none given)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from exporter.config.options import ExportOptions

#: the pragma's keys whose values are Python expressions, evaluated in the module's namespace
EVALUATED_KEYS = ("args", "kwargs", "dynamic_shapes", "init", "input_names", "output_names",
                  "opset", "atol", "rtol", "runtimes", "precision",
                  "custom_translation_table")


@dataclass
class TargetOptions:
    args: Any = None  # the example inputs: a tuple once load has checked them
    kwargs: Any = None
    init: Any = None  # a class target's constructor keyword arguments
    dynamic_shapes: Any = None
    custom_translation_table: Any = None
    input_names: Any = None
    output_names: Any = None
    opset: Any = None
    atol: Any = None
    rtol: Any = None
    runtimes: Any = None
    precision: Any = None
    training: bool = False
    given: set[str] = field(default_factory=set)  # the keys set by the target, not the defaults

    @classmethod
    def defaulting_to(cls, defaults: ExportOptions) -> TargetOptions:
        return cls(opset=defaults.opset, atol=defaults.atol, rtol=defaults.rtol,
                   runtimes=defaults.runtimes, precision=defaults.precision)

    def set(self, key: str, value: Any) -> None:
        """The target gives ``key`` (a field's name) this value."""
        if key not in _FIELDS:
            raise KeyError(f"no export option {key!r}")
        setattr(self, key, value)
        self.given.add(key)

    def name_clash(self) -> tuple[str, str] | None:
        """A name given to the ONNX model's inputs and outputs that cannot be kept (each ONNX
        value has one name of its own), and why: it is twice in ``input_names`` or
        ``output_names``, or it names an input and an output."""
        inputs = [str(name) for name in self.input_names or ()]
        outputs = [str(name) for name in self.output_names or ()]
        for names, key in ((inputs, "input_names"), (outputs, "output_names")):
            twice = next((name for at, name in enumerate(names) if name in names[:at]), None)
            if twice is not None:
                return twice, f"`{twice}` is in `{key}` twice"
        both = next((name for name in outputs if name in inputs), None)
        return (both, f"`{both}` names an input and an output") if both is not None else None

    def get(self, key: str) -> Any:
        if key not in _FIELDS:
            raise KeyError(f"no export option {key!r}")
        return getattr(self, key)


_FIELDS = frozenset(f.name for f in dataclasses.fields(TargetOptions)) - {"given"}
