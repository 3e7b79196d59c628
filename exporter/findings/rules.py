"""The rule catalog: stable ids, one documentation page each (``docs/rules/<ID>.md``).

Ids are part of the public interface (CLI ``--select``/``--ignore``, SARIF ``ruleId``,
suppressions in CI); once released, an id keeps its meaning forever.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from exporter import HOMEPAGE
from exporter.versions import install_hint


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    stage: str
    severity: Severity
    summary: str
    description: str
    fix: str

    @property
    def doc_url(self) -> str | None:
        """The page on the web, when a documentation base URL is configured."""
        return rule_doc_url(self.id)

    @property
    def doc_path(self) -> Path:
        """The page installed with onnxlens (``exporter/findings/rule_docs`` is ``docs/rules``)."""
        return RULE_DOCS / f"{self.id}.md"

    @property
    def doc_link(self) -> str:
        """What a link to the rule opens: the configured web page, else the installed one."""
        return self.doc_url or self.doc_path.as_uri()


RULE_DOCS = Path(__file__).resolve().parent / "rule_docs"
#: where the rule pages are published (e.g. a fork's or a mirror's docs/rules/); unset, links
#: open the pages installed with onnxlens, never an address that may not exist
DOCS_URL_VARIABLE = "ONNXLENS_RULE_DOCS_URL"


#: where a released onnxlens's rule pages are on the web: docs/rules/ on the repository's
#: default branch (an id keeps its meaning forever, so its page there stays true). Only a log
#: that travels to other machines (SARIF's helpUri) links there when no base URL is configured.
PUBLISHED_RULE_DOCS = f"{HOMEPAGE}/blob/main/docs/rules"


def rule_doc_url(rule_id: str) -> str | None:
    base = os.environ.get(DOCS_URL_VARIABLE, "").strip()
    return f"{base.rstrip('/')}/{rule_id}.md" if base else None


def published_doc_url(rule_id: str) -> str:
    """The rule's page on the web: the configured base URL's, else the project's own."""
    return rule_doc_url(rule_id) or f"{PUBLISHED_RULE_DOCS}/{rule_id}.md"


def rule_page(rule_id: str) -> str:
    """The rule's documentation page (markdown)."""
    return (RULE_DOCS / f"{rule_id}.md").read_text(encoding="utf-8")


_E, _W = Severity.ERROR, Severity.WARNING

_RULES = [
    Rule("ONNX001", "invalid-annotation", "load", _E,
         "The export annotation is invalid.",
         "The `# onnx-export:` pragma or the ExportableModule methods could not be parsed or "
         "evaluated: bad syntax, an unknown key, or an expression that raised.",
         "Fix the pragma: it is a Python keyword-argument list such as "
         "`args=(torch.randn(2, 8),)`."),
    Rule("ONNX002", "import-failed", "load", _E,
         "The module could not be imported.",
         "Importing the file that holds the target raised an exception.",
         "Fix the error at the marked line; the file must import without side effects."),
    Rule("ONNX003", "construction-failed", "load", _E,
         "The target could not be built.",
         "Calling the class (with `init=`) or the factory function raised, or returned "
         "something that is not a torch.nn.Module.",
         "Make the target buildable with the pragma's `init=` arguments, or return a module."),
    Rule("ONNX004", "eager-forward-failed", "load", _E,
         "The model fails in eager PyTorch with the example inputs.",
         "Running `model(*args, **kwargs)` in plain PyTorch raised, so the example inputs "
         "do not fit the model.",
         "Fix the example inputs (`args=`/`kwargs=`) or the model code at the marked line."),
    Rule("ONNX005", "target-not-checked", "load", Severity.INFO,
         "A target is not checked: an ExportableModule whose constructor needs arguments, "
         "an export call its function did not reach, or a notebook whose kernel is not "
         "Python.",
         "Subclasses of `torch.onnx.ExportableModule` are export targets when they can be "
         "built with no arguments; this one's `__init__` has required parameters, so "
         "onnxlens cannot build it on its own. Or: a function marked with a pragma returned "
         "without making one of its `torch.onnx.export` calls (a branch not taken). Or: a "
         "notebook's kernel language is not Python (an R notebook): its cells are not read.",
         "Add `# onnx-export: init={...}` above the class with the constructor's arguments, "
         "or give them defaults; for an export call, make the function reach it; a "
         "notebook of another language needs nothing (exclude it to silence this)."),
    Rule("ONNX006", "unused-suppression", "report", Severity.WARNING,
         "An `# onnxlens: ignore` comment silenced nothing.",
         "A suppression comment on this line (or on a target's pragma or def/class line) "
         "names rules that no finding reported there has: the problem it silenced is gone, "
         "or the ids are wrong. Off unless selected (`--select ONNX006`).",
         "Remove the comment, or correct the rule ids in it."),
    Rule("ONNX101", "data-dependent", "capture", _E,
         "Control flow or a value depends on tensor data.",
         "torch.export traces with symbolic shapes and cannot follow a Python branch, loop "
         "count or size that depends on the values inside a tensor.",
         "Use `torch.cond` for data-dependent branches, `torch._check` to state what you "
         "know about a value, or compute the result without leaving tensor land."),
    Rule("ONNX102", "dynamic-dim-specialized", "capture", _E,
         "A dimension declared dynamic was specialized or constrained.",
         "The code treats a dimension that `dynamic_shapes` declares dynamic as a constant "
         "(or limits its range), so the exported graph would only work for one size.",
         "Make the code size-agnostic (use -1 in reshapes, read sizes from `x.shape`), or "
         "declare only the sizes it supports."),
    Rule("ONNX103", "unsupported-python", "capture", _E,
         "A Python construct cannot be captured.",
         "The code leaves the traceable subset: it converts tensors to NumPy or Python "
         "lists, uses an unsupported builtin, or calls into code torch.export cannot trace.",
         "Keep the computation in torch operations at the marked line."),
    Rule("ONNX104", "unsupported-io-structure", "capture", _E,
         "An input or output has a structure the exporter cannot flatten.",
         "Inputs and outputs must be tensors, numbers, or (nested) tuples, lists and dicts "
         "of them; custom classes must be registered as pytree nodes.",
         "Return tensors or plain containers of tensors."),
    Rule("ONNX105", "capture-failed", "capture", _E,
         "torch.export could not capture the model.",
         "Graph capture failed for a reason not covered by a more specific rule.",
         "Read the message; rewriting the marked line usually helps."),
    Rule("ONNX106", "unsound-graph", "capture", _W,
         "The graph was only captured by a draft export and is unsound here.",
         "A strict capture failed; a draft export went on by assuming what happened for the "
         "example inputs. Later stages checked that assumed graph, which is wrong for "
         "inputs that take another path at the marked line.",
         "Fix the capture problem reported at the same line."),
    Rule("ONNX107", "dynamic-range-narrowed", "capture", _W,
         "The exported graph holds for only part of a declared dynamic range.",
         "torch.export found a guard that bounds a dimension declared dynamic (a branch on "
         "its size, an assertion) and torch.onnx.export accepted the narrower range without "
         "an error. The ONNX model keeps the dimension dynamic and checks nothing, so at "
         "sizes outside that range it runs and can give wrong results. A warning, which "
         "becomes an error when a run at a declared size just outside the range shows the "
         "ONNX model wrong (ONNX Runtime fails, or differs from PyTorch, where PyTorch runs).",
         "Export both paths with `torch.cond` where the code branches on the size, or "
         "declare the range the model is valid for (`Dim(\"seq\", min=10)`)."),
    Rule("ONNX201", "no-onnx-translation", "translate", _E,
         "The operator has no ONNX translation.",
         "No function in the torchlib registry (or in `custom_translation_table`) "
         "translates this ATen operator to ONNX.",
         "Rewrite with supported operators, or add an onnxscript function to the pragma's "
         "`custom_translation_table`."),
    Rule("ONNX202", "translation-failed", "translate", _E,
         "Translating the node to ONNX failed.",
         "A translation function exists but raised while building ONNX nodes.",
         "If the translation is yours (`custom_translation_table`), fix it; otherwise "
         "rewrite the marked expression."),
    Rule("ONNX203", "opset-not-reached", "translate", _W,
         "The model does not use the requested opset.",
         "torch.onnx.export translates at torchlib's opset and converts the model to the "
         "requested one; where the conversion is not possible it keeps another opset and only "
         "logs it. The saved model then uses the opset this warning names.",
         "Ask for an opset the converter supports (18 to 23 with the pinned toolchain), or "
         "leave `opset` out to get torch.onnx.export's default."),
    Rule("ONNX301", "onnx-checker-failed", "validate", _E,
         "The ONNX model is invalid.",
         "`onnx.checker.check_model` rejected a node built for the marked line.",
         "Fix the translation that produced the node (often a custom translation)."),
    Rule("ONNX302", "shape-inference-failed", "validate", _E,
         "ONNX shape inference failed.",
         "Strict shape and type inference found an inconsistency at the node built for "
         "the marked line.",
         "Check the shapes and dtypes your translation produces."),
    Rule("ONNX401", "ort-session-failed", "runtime", _E,
         "ONNX Runtime cannot load the model.",
         "Creating an onnxruntime.InferenceSession failed, most often because ONNX Runtime "
         "has no kernel for an operator with these input types.",
         "Cast to a supported dtype around the marked line (float32 is the safest)."),
    Rule("ONNX402", "ort-run-failed", "runtime", _E,
         "ONNX Runtime failed to run the model.",
         "The session was created but running it on the example inputs raised.",
         "Check the node named in the message and the shapes it receives."),
    Rule("ONNX403", "other-size-failed", "dynamic", _E,
         "The model fails or is wrong at another dynamic size.",
         "Run again with the dynamic dimensions changed, ONNX Runtime raised or disagreed "
         "with PyTorch.",
         "Make the marked code size-agnostic; see the sizes in the message."),
    Rule("ONNX501", "output-mismatch", "numerics", _E,
         "An output of ONNX Runtime differs from PyTorch.",
         "The largest difference exceeds the tolerance (`atol`/`rtol`).",
         "See ONNX502 for where the values first diverge, or loosen the tolerance."),
    Rule("ONNX502", "first-divergence", "numerics", _E,
         "The values first diverge here.",
         "Comparing every intermediate value of PyTorch and ONNX Runtime, this is the "
         "first operation whose result differs beyond the tolerance.",
         "Check the translation of this operation (often a custom translation)."),
    Rule("ONNX503", "non-finite-in-ort", "numerics", _E,
         "ONNX Runtime produced NaN or infinity where PyTorch did not.",
         "An output holds non-finite values only in the ONNX Runtime result.",
         "Check for overflow in lower precision and for ops with different edge cases."),
    Rule("ONNX504", "random-output", "numerics", Severity.INFO,
         "An output depends on random numbers the model draws; only its shape is compared.",
         "The model draws random numbers in its forward (an operator torch tags "
         "`nondeterministic_seeded`: `randn`, `rand_like`, `bernoulli`, dropout in training "
         "mode, ...). The ONNX model draws its own, so the outputs that depend on them cannot "
         "equal PyTorch's; onnxlens compares their shapes, not their values.",
         "Nothing to fix if the randomness is intended. To have the values checked, make the "
         "random part an input of the model, or put it behind `self.training`."),
    Rule("ONNX601", "torchscript-exporter", "call", _W,
         "An export call runs the deprecated TorchScript exporter (`dynamo=False`).",
         "`torch.onnx.export(..., dynamo=False)` runs the TorchScript-based exporter, which "
         "torch 2.9 stopped defaulting to and deprecated. The default exporter (torch.export "
         "based) traces differently, takes `dynamic_shapes` rather than `dynamic_axes` and "
         "fails on other code; onnxlens checks the default exporter only.",
         "Remove `dynamo=False` (quick fix) and check the call with the default exporter."),
    Rule("ONNX602", "dynamic-axes-converted", "call", _W,
         "`dynamic_axes` is converted to `dynamic_shapes`, with the risks of `Dim.DYNAMIC`.",
         "With the default exporter, `dynamic_axes` (written for the TorchScript exporter) is "
         "turned into `dynamic_shapes` whose listed axes are `Dim.DYNAMIC`: torch.export may "
         "specialize such an axis to the example's size, or stop with `Constraints "
         "violated`; entries for outputs are dropped.",
         "Give `dynamic_shapes` keyed by `forward`'s parameter names (the quick fix writes "
         "the equivalent one when the input names map onto `forward`'s parameters)."),
    Rule("ONNX603", "opset-converted", "call", _W,
         "The requested opset is reached by converting the model down.",
         "The exporter's translations are written for opset 18 and up; a lower "
         "`opset_version` builds the graph at opset 18 and converts it down with the ONNX "
         "version converter, which fails for some operators (the model then stays at opset "
         "18).",
         "Use `opset_version=18` or higher if the runtime you target supports it; otherwise "
         "check that the converted model runs."),
    Rule("ONNX604", "ignored-argument", "call", _W,
         "An argument of the export call is ignored by the default exporter.",
         "`torch.onnx.export` still accepts arguments of the TorchScript exporter "
         "(`training`, `operator_export_type`, `do_constant_folding`, `custom_opsets`, "
         "`export_modules_as_functions`, `autograd_inlining`), but the torch.export-based "
         "exporter does not use them; `dynamic_axes` is ignored when `dynamic_shapes` is "
         "given, `export_params` and `keep_initializers_as_inputs` when no file is.",
         "Remove the argument (quick fix) and do what the message says instead."),
    Rule("ONNX701", "runtime-unsupported-node", "deploy", _E,
         "A runtime you deploy to cannot run this node.",
         "A runtime named in `runtimes` (docs/runtimes.md) has no implementation of the ONNX "
         "operator this line exports to (OpenVINO: no conversion rule), so the model does "
         "not load there, although ONNX Runtime's CPU provider runs it.",
         "Write the computation with operators the runtime supports, or deploy to another."),
    Rule("ONNX702", "runtime-failed", "deploy", _E,
         "A runtime you deploy to fails to compile or run the model.",
         "The runtime read the model but raised while compiling or running it (or ONNX "
         "Runtime's converter to a precision named in `precision` refused the model); the "
         "nodes its message names are marked.",
         "See the runtime's message; rewrite the marked computation, or report it to the "
         "runtime's project when the model is valid (ONNX Runtime runs it)."),
    Rule("ONNX703", "runtime-output-mismatch", "deploy", _E,
         "An output differs from PyTorch on a runtime you deploy to.",
         "The runtime ran the model on the example inputs, and an output differs from "
         "PyTorch's beyond the tolerance (`atol`/`rtol`, else by dtype).",
         "Find the operator that computes differently there (ONNX Runtime's numerics stage "
         "compares every intermediate), or loosen the tolerance."),
    Rule("ONNX704", "runtime-not-run-here", "deploy", _W,
         "A runtime you deploy to could not be tried on this machine.",
         "The runtime needs hardware or packages this machine lacks (a GPU, an execution "
         "provider of onnxruntime, the `openvino` package), so the model was not checked "
         "there: nothing was proven for it.",
         "Check on a machine that has the runtime, or install what the message names."),
    Rule("ONNX705", "runtime-cpu-fallback", "deploy", _W,
         "This node runs on the CPU, not on the accelerator you deploy to.",
         "The execution provider named in `runtimes` does not take this node (CUDA, TensorRT: "
         "where ONNX Runtime placed it in a session; NNAPI, CoreML: by ONNX Runtime's "
         "operator table, an operator it lacks or an input of dynamic shape), so ONNX Runtime "
         "runs it on its CPU provider and cuts the graph into "
         "partitions around it, with copies between them. The model still runs.",
         "Use an operator the provider supports, or fix the input sizes (ONNX Runtime's "
         "`make_dynamic_shape_fixed`); or accept the fallback."),
    Rule("ONNX706", "precision-loss", "deploy", _E,
         "At a precision you deploy at, an output overflows or loses too much accuracy.",
         "The model converted to a precision named in `precision` (fp16 by ONNX Runtime's "
         "float16 converter, int8 by its static quantization calibrated on the example "
         "inputs) ran on the example inputs, and an output holds infinity or NaN where "
         "PyTorch's is finite, or differs from PyTorch's float32 output by more than the "
         "precision's budget (a share of the output's largest magnitude: 1 % for fp16, 5 % "
         "for int8).",
         "See ONNX707 for the first value that goes wrong and whether keeping it at float32 "
         "helps, or deploy at a wider precision."),
    Rule("ONNX707", "precision-first-loss", "deploy", _E,
         "At a precision you deploy at, the values first go wrong here.",
         "Comparing every intermediate value of the converted model in ONNX Runtime with "
         "PyTorch's at float32, this is the first operation whose value overflows or leaves "
         "the precision's budget. onnxlens then converts the model again keeping this "
         "operation (and, while that is not enough, the ones feeding it, three tries at "
         "most) at float32; the message names the nodes when that makes every runtime that "
         "differed match.",
         "Keep the nodes the message names at float32 when you convert (the argument it "
         "names), rescale the computation so its values fit the precision, or deploy at a "
         "wider precision."),
    Rule("ONNX901", "timed-out", "tool", _E,
         "The check timed out.",
         "The check did not finish within the time limit.",
         "Look for infinite loops, or raise the timeout."),
    Rule("ONNX902", "worker-crashed", "tool", _E,
         "The export worker crashed.",
         "The process running the check died (a segfault, `os._exit`, or a kill).",
         "Look for native crashes or process exits in the model code."),
    Rule("ONNX903", "out-of-memory", "tool", _E,
         "The check ran out of memory.",
         "The process running the check went past its memory limit.",
         "Use smaller example inputs or `weights=\"none\"`, or raise the memory limit."),
    Rule("ONNX904", "dependency-missing", "tool", _E,
         "A dependency of the export toolchain is missing.",
         "torch, onnx, onnxscript or onnxruntime could not be imported.",
         f"Install them into the interpreter that runs onnxlens: `{install_hint()}`."),
    Rule("ONNX999", "internal-error", "tool", _E,
         "onnxlens failed internally.",
         "An unexpected error in onnxlens itself; the model may be fine.",
         "Please report it with the message."),
]

RULES: dict[str, Rule] = {rule.id: rule for rule in _RULES}


def get_rule(rule_id: str) -> Rule:
    return RULES[rule_id]
