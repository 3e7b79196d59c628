"""Every fixture workspace gets exactly the diagnostics a user should see: rule, file,
range (1-based, end exclusive) and severity."""

from __future__ import annotations

import pytest

from exporter.findings.result import TensorSummary

# (rule, file relative to the fixture workspace, start line, start col, end line, end col, severity)
EXPECTED = {
    "clean/convnet.py": [],
    "clean/factory.py": [],
    "clean/tokens.py": [],
    # outputs that differ because of what torch.export traced (the hints: test_comparing.py)
    "capture_paths/model.py": [
        ("ONNX501", "model.py", 25, 16, 25, 61, "error"),  # TransformerEncoder's fast path
        ("ONNX403", "model.py", 30, 16, 30, 27, "error"),  # is_grad_enabled, other sizes
        ("ONNX501", "model.py", 30, 16, 30, 27, "error"),
        ("ONNX501", "model.py", 52, 16, 52, 30, "error"),  # in a helper
        ("ONNX501", "model.py", 63, 16, 63, 21, "error"),  # requires_grad
        ("ONNX501", "model.py", 76, 16, 76, 32, "error"),  # a wrong translation
        # an output computed wrongly and used after: no ONNX502 at the later operation
        ("ONNX501", "model.py", 90, 18, 90, 39, "error"),
        ("ONNX501", "model.py", 91, 24, 91, 38, "error"),
    ],
    "checker_failure/model.py": [("ONNX301", "model.py", 13, 16, 13, 32, "error")],
    # complex outputs: four were a false ONNX501 (a shape [2, 9, 2] in ONNX Runtime against
    # [2, 9]) or a crash (a conjugated one); the wrong translation before an FFT is still found
    "complex_outputs/model.py": [("ONNX501", "model.py", 74, 16, 74, 59, "error"),
                                 ("ONNX502", "model.py", 74, 31, 74, 47, "error")],
    # a size returned before a tensor shifted every comparison (a false ONNX501/ONNX403 on
    # four targets); a constant output was "'int' object has no attribute 'name'"
    "number_outputs/model.py": [
        ("ONNX202", "model.py", 43, 7, 43, 25, "error"),  # a size of a static dimension
        ("ONNX403", "model.py", 56, 28, 56, 53, "error"),  # a wrong translation, a size first
        ("ONNX403", "model.py", 56, 28, 56, 49, "error"),
        ("ONNX501", "model.py", 56, 28, 56, 53, "error"),
        ("ONNX502", "model.py", 56, 28, 56, 49, "error"),
        ("ONNX202", "model.py", 76, 7, 76, 25, "error"),  # a flag in a dict of outputs
        ("ONNX504", "model.py", 91, 32, 91, 51, "info"),  # a size, then a random draw
    ],
    # an int input declared dynamic is an ONNX input: every target was a false ONNX402
    "number_inputs/model.py": [
        ("ONNX501", "model.py", 43, 16, 43, 44, "error"),  # a wrong translation after it
    ],
    "constructor_error/model.py": [("ONNX003", "model.py", 8, 22, 8, 34, "error")],
    # operators without a translation in control flow's subgraphs: one ONNX202 at the class
    # for the first of them before; each an ONNX201 at its control-flow call now
    "control_flow/model.py": [
        ("ONNX201", "model.py", 22, 16, 22, 62, "error"),  # a torch.cond branch
        ("ONNX201", "model.py", 34, 16, 34, 50, "error"),  # a while_loop body
        ("ONNX201", "model.py", 42, 12, 42, 67, "error"),  # nested conds, in helpers
        ("ONNX201", "model.py", 63, 23, 63, 52, "error"),  # a scan body ...
        ("ONNX201", "model.py", 64, 16, 64, 40, "error"),  # ... and the top level
        ("ONNX201", "model.py", 82, 16, 82, 86, "error"),  # branches that are methods
    ],
    # issue 38: failing operators in helpers under decorators, each at its own line
    "decorated_helpers/model.py": [
        ("ONNX201", "model.py", 16, 16, 16, 42, "error"),  # inference_mode, no_grad forward
        ("ONNX201", "model.py", 29, 16, 29, 35, "error"),  # three stacked on a method
        ("ONNX201", "model.py", 38, 12, 38, 31, "error"),  # functools.wraps, a function
        ("ONNX201", "model.py", 50, 12, 50, 31, "error"),  # a contextmanager decorator
        ("ONNX201", "model.py", 65, 16, 65, 38, "error"),  # autocast, two levels down
        ("ONNX201", "model.py", 80, 16, 80, 42, "error"),  # torch.compiler.disable
        ("ONNX201", "ops/special.py", 9, 12, 9, 27, "error"),  # another module, stacked
    ],
    "data_dependent_branch/model.py": [
        ("ONNX101", "model.py", 7, 12, 7, 23, "error"),
        ("ONNX106", "model.py", 7, 12, 7, 23, "warning"),
    ],
    # issue 38: a data-dependent branch's guard on its unbacked value (Ne(u0, 1)) is no
    # ONNX102 (it was reported on lines 13, 22 and 49); the reshapes that fix a size are
    "data_dependent_dynamic/model.py": [
        ("ONNX101", "model.py", 13, 12, 13, 31, "error"),
        ("ONNX101", "model.py", 22, 12, 22, 28, "error"),
        ("ONNX101", "model.py", 31, 12, 31, 23, "error"),
        ("ONNX101", "model.py", 40, 12, 40, 33, "error"),
        ("ONNX101", "model.py", 49, 12, 49, 36, "error"),
        ("ONNX102", "model.py", 12, 13, 12, 35, "error"),
        ("ONNX102", "model.py", 21, 16, 21, 31, "error"),
        ("ONNX102", "model.py", 39, 17, 39, 30, "error"),
        ("ONNX102", "model.py", 40, 12, 40, 33, "error"),  # `a * b` fixes b's size to a's
        ("ONNX102", "model.py", 48, 18, 48, 38, "error"),
        ("ONNX106", "model.py", 12, 13, 12, 35, "warning"),
        ("ONNX106", "model.py", 13, 12, 13, 31, "warning"),
        ("ONNX106", "model.py", 21, 16, 21, 31, "warning"),
        ("ONNX106", "model.py", 22, 12, 22, 28, "warning"),
        ("ONNX106", "model.py", 31, 12, 31, 23, "warning"),
        ("ONNX106", "model.py", 39, 17, 39, 30, "warning"),
        ("ONNX106", "model.py", 40, 12, 40, 33, "warning"),
        ("ONNX106", "model.py", 48, 18, 48, 38, "warning"),
        ("ONNX106", "model.py", 49, 12, 49, 36, "warning"),
    ],
    "data_dependent_size/model.py": [
        ("ONNX101", "model.py", 7, 17, 7, 42, "error"),
        ("ONNX106", "model.py", 7, 17, 7, 42, "warning"),
    ],
    "dynamic_size_failure/model.py": [
        # the run at the lower bound (dim0=2): ONNX Runtime's Gather of row 3 fails
        ("ONNX102", "model.py", 8, 41, 8, 58, "error"),
        ("ONNX403", "model.py", 8, 41, 8, 58, "error"),
    ],
    # issue 38: wrong at size 1, which the declared ranges hold (not NotMeantForOne's)
    "dynamic_size_one/model.py": [
        ("ONNX403", "model.py", 13, 16, 13, 21, "error"),
        ("ONNX403", "model.py", 21, 16, 21, 27, "error"),
    ],
    "dynamic_specialized/model.py": [
        ("ONNX102", "model.py", 7, 43, 7, 60, "error"),
        ("ONNX106", "model.py", 7, 43, 7, 60, "warning"),
    ],
    "eager_failure/model.py": [("ONNX004", "model.py", 11, 16, 11, 30, "error")],
    # torch.onnx.is_in_onnx_export() is True while capture traces (two false ONNX201 and two
    # missed before: the eager path was captured)
    "export_only_paths/model.py": [("ONNX401", "model.py", 73, 20, 74, 84, "error"),
                                   ("ONNX501", "model.py", 61, 20, 61, 40, "error")],
    # export calls of an ExportedProgram: each was ONNX003 ("checks the export of a
    # torch.nn.Module"); a TorchScript module, refused by the exporter, was ONNX004
    # inputs torch.export cannot take: a list, None or a dict was clean (three), ONNX003 or
    # ONNX202 before
    "export_call_inputs/model.py": [
        ("ONNX105", "model.py", 21, 5, 21, 22, "error"),  # a list
        ("ONNX105", "model.py", 27, 5, 27, 22, "error"),  # a list ending in keyword inputs
        ("ONNX105", "model.py", 37, 5, 37, 12, "error"),  # a list, through a helper
        ("ONNX105", "model.py", 42, 5, 42, 22, "error"),  # None
        ("ONNX105", "model.py", 47, 5, 47, 22, "error"),  # a dict
    ],
    # an ExportableModule's example_arguments() that are not a tuple: clean before (4)
    "exportable_inputs/model.py": [
        ("ONNX105", "model.py", 8, 7, 8, 17, "error"),  # a list
        ("ONNX105", "model.py", 16, 7, 16, 22, "error"),  # a list, keyword inputs apart
        ("ONNX105", "model.py", 24, 7, 24, 16, "error"),  # one tensor
        ("ONNX105", "model.py", 36, 7, 36, 22, "error"),  # a list from a helper
    ],
    "exported_programs/model.py": [
        ("ONNX201", "model.py", 33, 16, 33, 26, "error"),  # i0, in a helper of the forward
        ("ONNX501", "model.py", 72, 9, 72, 26, "error"),  # a wrong custom translation
        ("ONNX103", "model.py", 79, 5, 79, 22, "error"),  # torch.jit.script
        ("ONNX103", "model.py", 85, 5, 85, 22, "error"),  # torch.jit.trace
    ],
    "helper_module/model.py": [("ONNX201", "layers/special.py", 6, 16, 6, 35, "error")],
    "import_error/model.py": [("ONNX002", "model.py", 2, 1, 2, 34, "error")],
    "invalid_model/model.py": [("ONNX302", "model.py", 13, 16, 13, 37, "error")],
    "io_structure/model.py": [("ONNX104", "model.py", 12, 16, 12, 33, "error")],
    # inputs by keyword only (`kwargs=` without `args=`): each was ONNX001 "no example inputs"
    "keyword_inputs/model.py": [("ONNX101", "model.py", 50, 12, 50, 38, "error"),
                                ("ONNX102", "model.py", 68, 16, 68, 35, "error"),
                                ("ONNX106", "model.py", 50, 12, 50, 38, "warning"),
                                ("ONNX106", "model.py", 68, 16, 68, 35, "warning")],
    # a dict last in the inputs is the keyword inputs to torch.onnx.export: three failing
    # exports were clean and three working ones ONNX004 when a pragma's dict was positional
    "keyword_inputs/trailing_dict.py": [
        ("ONNX004", "trailing_dict.py", 17, 16, 17, 72, "error"),  # the pragma's args
        ("ONNX004", "trailing_dict.py", 22, 16, 23, 55, "error"),  # over two lines
        ("ONNX004", "trailing_dict.py", 40, 5, 40, 23, "error"),  # a factory's inputs
        ("ONNX004", "trailing_dict.py", 48, 5, 48, 22, "error"),  # an export call
    ],
    # lazy modules: each was ONNX999 (their parameters counted before the forward made them)
    "lazy_modules/model.py": [("ONNX101", "model.py", 42, 12, 42, 40, "error"),
                              ("ONNX106", "model.py", 42, 12, 42, 40, "warning")],
    # a forward that changes the model's own state: each was a false ONNX501 (and ONNX403 at
    # other sizes), the exporter seeing the state the check's eager forward left
    # a forward that updates its own tensors in place and returns them: each was a false
    # ONNX501 (and ONNX403), the state put back changing the outputs the run gave
    "returned_state/model.py": [],
    "stateful_forward/model.py": [("ONNX101", "model.py", 99, 12, 99, 32, "error"),
                                  ("ONNX106", "model.py", 99, 12, 99, 32, "warning")],
    # random draws in the forward: each was ONNX501 and ONNX502 ("check the translation")
    # at the draw; now a note (ONNX504), and the outputs not drawn are still compared
    "random_draws/model.py": [("ONNX504", "model.py", 24, 27, 24, 46, "info"),  # randn_like
                              ("ONNX504", "model.py", 28, 11, 28, 32, "info"),  # in a helper
                              ("ONNX504", "model.py", 58, 16, 58, 50, "info"),  # F.dropout
                              ("ONNX501", "model.py", 58, 52, 58, 68, "error"),  # beside it
                              # the first divergence passes over the noise drawn before
                              ("ONNX504", "model.py", 68, 25, 68, 44, "info"),
                              ("ONNX501", "model.py", 69, 16, 69, 36, "error"),
                              ("ONNX502", "model.py", 69, 16, 69, 32, "error"),
                              # outputs renamed (`output_names`), each marked at its own call
                              ("ONNX504", "model.py", 77, 16, 77, 34, "info"),
                              ("ONNX501", "model.py", 77, 40, 77, 56, "error"),
                              ("ONNX504", "model.py", 88, 16, 88, 69, "info"),  # bernoulli_
                              ("ONNX504", "model.py", 113, 40, 113, 64, "info"),  # rand, argmax
                              # attention's dropout: the ONNX model draws none
                              ("ONNX501", "model.py", 135, 16, 136, 90, "error"),
                              ("ONNX501", "model.py", 145, 16, 145, 43, "error")],  # frozen
    "malformed_pragma/model.py": [
        ("ONNX001", "model.py", 4, 16, 4, 40, "error"),
        ("ONNX001", "model.py", 10, 43, 10, 72, "error"),
        ("ONNX001", "model.py", 16, 48, 16, 74, "error"),
    ],
    "missing_fake_kernel/model.py": [
        ("ONNX105", "model.py", 12, 16, 12, 29, "error"),
        ("ONNX106", "model.py", 12, 16, 12, 29, "warning"),
        ("ONNX201", "model.py", 12, 16, 12, 29, "error"),
    ],
    "mixed/model.py": [
        ("ONNX101", "model.py", 8, 12, 8, 24, "error"),
        ("ONNX106", "model.py", 8, 12, 8, 24, "warning"),
        ("ONNX201", "model.py", 7, 13, 7, 32, "error"),
        ("ONNX201", "model.py", 10, 13, 10, 29, "error"),
    ],
    # names the ONNX model cannot keep: the hint names the name (it spoke of translations)
    "name_clashes/model.py": [
        ("ONNX202", "model.py", 23, 5, 23, 22, "error"),  # an input name twice
        ("ONNX301", "model.py", 29, 5, 29, 22, "error"),  # an output named as an input
        ("ONNX202", "model.py", 42, 5, 42, 10, "error"),  # through a helper
        ("ONNX202", "model.py", 46, 7, 46, 25, "error"),  # a pragma's output names
        ("ONNX301", "model.py", 52, 7, 52, 33, "error"),
    ],
    # models that return no tensor: ONNX Runtime's refusal of a model without outputs, said
    # in words (it was ONNX Runtime's internals and a hint about dtypes)
    "no_outputs/model.py": [
        ("ONNX401", "model.py", 11, 7, 11, 18, "error"),  # None
        ("ONNX401", "model.py", 18, 7, 18, 26, "error"),  # ()
        ("ONNX401", "model.py", 25, 7, 25, 27, "error"),  # only updates its buffer
        ("ONNX401", "model.py", 41, 5, 41, 22, "error"),  # an export call, a dict of None
        ("ONNX401", "model.py", 45, 5, 45, 17, "error"),  # a factory, nested None
    ],
    "no_translation/model.py": [
        ("ONNX201", "model.py", 7, 13, 7, 32, "error"),
        ("ONNX201", "model.py", 8, 13, 8, 29, "error"),
    ],
    "non_finite/model.py": [("ONNX503", "model.py", 13, 16, 13, 34, "error")],
    "ort_kernel_missing/model.py": [("ONNX401", "model.py", 7, 13, 7, 34, "error")],
    "ort_run_failure/model.py": [("ONNX402", "model.py", 14, 16, 14, 32, "error")],
    "translation_error/model.py": [("ONNX202", "model.py", 12, 16, 12, 32, "error")],
    "unsupported_python/model.py": [("ONNX103", "model.py", 7, 21, 7, 33, "error")],
    # declared ranges narrowed, decorated forwards, a draft graph (test_soundness.py)
    # Python functions on dynamic sizes: the ones without a translation named as written.
    # (Not a `model.py`: in one process, dynamo keeps an earlier `model` module's globals for
    # the strict capture of `math.sqrt`; docs/api.md)
    "size_functions/sizes.py": [
        ("ONNX201", "sizes.py", 16, 20, 16, 41, "error"),  # round()
        ("ONNX201", "sizes.py", 26, 19, 26, 42, "error"),  # round() in a helper
        ("ONNX201", "sizes.py", 32, 20, 32, 41, "error"),  # math.sqrt: torch._sym_sqrt
        ("ONNX403", "sizes.py", 40, 16, 40, 44, "error"),  # int(n / 4): 1 in ONNX at n=2
        ("ONNX102", "sizes.py", 46, 20, 46, 40, "error"),  # math.log specializes n
        ("ONNX106", "sizes.py", 46, 20, 46, 40, "warning"),
    ],
    "soundness/bounded.py": [  # issue 38: at the guard, warnings (the model's own bounds)
        ("ONNX107", "bounded.py", 23, 9, 23, 78, "warning"),
        ("ONNX107", "bounded.py", 38, 12, 38, 40, "warning"),
        ("ONNX107", "bounded.py", 48, 12, 48, 32, "warning"),
        ("ONNX107", "bounded.py", 61, 12, 61, 32, "warning"),
    ],
    "soundness/decorated.py": [
        ("ONNX201", "decorated.py", 25, 16, 25, 35, "error"),
        ("ONNX201", "decorated.py", 32, 16, 32, 35, "error"),
        ("ONNX201", "decorated.py", 39, 16, 39, 35, "error"),
        ("ONNX201", "decorated.py", 18, 12, 18, 31, "error"),  # in `bessel`, two calls deep
    ],
    "soundness/draft_range.py": [
        ("ONNX101", "draft_range.py", 22, 12, 22, 23, "error"),
        ("ONNX102", "draft_range.py", 12, 16, 12, 31, "error"),
        # issue 38: no ONNX102 on line 22, the data-dependent `if` (its guard is on u0), nor on
        # line 23, whose guard `((s77//2)) <= s77` holds at every size
        ("ONNX106", "draft_range.py", 22, 12, 22, 23, "warning"),
    ],
    "soundness/narrowed.py": [
        ("ONNX107", "narrowed.py", 13, 12, 13, 28, "error"),
        ("ONNX107", "narrowed.py", 21, 12, 21, 28, "error"),
        ("ONNX107", "narrowed.py", 31, 12, 31, 28, "error"),
        ("ONNX107", "narrowed.py", 41, 12, 41, 26, "warning"),  # the guards, not the pragma
        ("ONNX107", "narrowed.py", 51, 12, 51, 28, "error"),
        # a float and a None among the inputs: was ONNX102 (twice) and ONNX403
        ("ONNX107", "narrowed.py", 77, 12, 77, 28, "error"),
        ("ONNX107", "narrowed.py", 87, 12, 87, 28, "error"),  # an int first, an upper bound
        ("ONNX107", "narrowed.py", 96, 12, 96, 35, "error"),  # by keyword, a bool and a None
    ],
    # user code that needs real stdio (issue 24): test_user_code_sees_real_stdio below
    "stdio/at_import.py": [],
    "stdio/in_forward.py": [],
    "stdio/noisy.py": [],
    # the reproductions of issue "truth" (test_verdicts.py says what each one shows)
    "verdicts/duplicate_names.py": [
        ("ONNX201", "duplicate_names.py", 15, 16, 15, 36, "error"),
    ],
    "verdicts/dynamic_values.py": [],
    "verdicts/input_mutation.py": [],
    "verdicts/no_operator.py": [],
    # issue 43: the model on OpenVINO (`runtimes`), each finding at the line the node came from
    "runtimes/model.py": [
        ("ONNX001", "model.py", 93, 52, 93, 64, "error"),  # no runtime of that name
        ("ONNX701", "model.py", 11, 12, 11, 31, "error"),  # Det, in a helper
        ("ONNX701", "model.py", 24, 16, 24, 40, "error"),  # logdet's Det, in a submodule
        ("ONNX701", "model.py", 42, 16, 42, 53, "error"),  # Det under two decorators
        ("ONNX702", "model.py", 53, 17, 53, 39, "error"),  # its CPU plugin's fusion throws
        ("ONNX504", "model.py", 53, 17, 53, 35, "info"),  # the draw (`rand_like(x) * 0`)
        ("ONNX703", "model.py", 60, 16, 60, 30, "error"),  # clamp of NaN
        ("ONNX703", "model.py", 67, 22, 67, 48, "error"),  # sort with NaN
        ("ONNX703", "model.py", 74, 16, 74, 52, "error"),  # shift of a negative int64
        ("ONNX704", "model.py", 87, 52, 87, 60, "warning"),  # no CUDA here
        ("ONNX705", "model.py", 102, 18, 102, 35, "warning"),  # NNAPI: no ReduceSum
        ("ONNX705", "model.py", 103, 27, 103, 46, "warning"),  # NNAPI and CoreML: no Det
        ("ONNX705", "model.py", 113, 16, 113, 42, "warning"),  # NNAPI: a dynamic batch
        # CoreML: no Gather of the input's ids (the Gather of positions the model holds is
        # folded by ONNX Runtime before CoreML sees it: no finding at line 152)
        ("ONNX705", "model.py", 163, 16, 163, 38, "warning"),
        # NNAPI: no GatherElements of the input, in a helper (of constants: folded, line 167
        # is clean for Picked)
        ("ONNX705", "model.py", 167, 12, 167, 41, "warning"),
        # no float64 Erf in ONNX Runtime's CPU kernels, nor in its WebAssembly build
        ("ONNX401", "model.py", 139, 16, 139, 37, "error"),
        ("ONNX701", "model.py", 139, 16, 139, 37, "error"),
    ],
    # issue 43: the model at fp16 and int8 (`precision`), each loss at the line it starts
    "precision/model.py": [
        ("ONNX001", "model.py", 77, 54, 77, 70, "error"),  # no precision of that name
        ("ONNX706", "model.py", 16, 16, 16, 36, "error"),  # a buffer beyond float16's range
        ("ONNX707", "model.py", 16, 16, 16, 30, "error"),
        ("ONNX706", "model.py", 25, 16, 25, 37, "error"),  # a constant beyond it, in a helper
        ("ONNX707", "model.py", 20, 12, 20, 28, "error"),
        ("ONNX706", "model.py", 40, 16, 40, 44, "error"),  # a buffer below its smallest
        ("ONNX707", "model.py", 40, 16, 40, 44, "error"),
        ("ONNX706", "model.py", 54, 16, 54, 52, "error"),  # int8: an outlier channel
        ("ONNX707", "model.py", 54, 26, 54, 51, "error"),
        ("ONNX706", "model.py", 61, 16, 61, 36, "error"),  # int8: a wide concatenation
        ("ONNX707", "model.py", 61, 16, 61, 36, "error"),
    ],
    # modules left in training mode at the export call (or by the pragma's `training=True`):
    # the notes and the first divergence name the dropout or normalization and say to call
    # `model.eval()`; the instance normalization and the eval-mode control are clean
    "training_mode/model.py": [
        ("ONNX504", "model.py", 17, 16, 17, 58, "info"),  # Dropout, never eval'd
        ("ONNX501", "model.py", 26, 16, 26, 49, "error"),  # BatchNorm2d, through a helper
        ("ONNX502", "model.py", 26, 16, 26, 49, "error"),
        ("ONNX504", "model.py", 35, 16, 35, 28, "info"),  # one AlphaDropout back in training
        ("ONNX403", "model.py", 64, 5, 64, 22, "error"),  # the normalization is the model
        ("ONNX501", "model.py", 64, 5, 64, 22, "error"),
        ("ONNX501", "model.py", 77, 16, 77, 59, "error"),  # the pragma's training=True
        ("ONNX502", "model.py", 77, 16, 77, 59, "error"),
        ("ONNX504", "model.py", 100, 16, 100, 61, "info"),  # F.dropout(training=True)
    ],
    "verdicts/opsets.py": [("ONNX203", "opsets.py", 25, 49, 25, 54, "warning")],
    "verdicts/sparse_tensors.py": [],
    "verdicts/strict_capture.py": [],
    "verdicts/tied_weights.py": [],
    "weightless/model.py": [("ONNX201", "model.py", 23, 16, 23, 48, "error")],
    "weightless/llama.py": [],
    "wrong_translation/model.py": [
        ("ONNX501", "model.py", 20, 16, 20, 25, "error"),
        ("ONNX502", "model.py", 19, 13, 19, 40, "error"),
    ],
}


def _rows(workspace, result):
    rows = []
    for d in result.diagnostics:
        r = d.location.range
        rows.append((d.rule, d.location.path.relative_to(workspace).as_posix(),
                     r.start.line, r.start.column, r.end.line, r.end.column, d.severity.value))
    return sorted(rows)


def test_every_fixture_has_expectations(fixture_results):
    assert sorted(fixture_results) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_diagnostics(fixture_results, name):
    workspace, result = fixture_results[name]
    assert _rows(workspace, result) == sorted(EXPECTED[name])


def test_mixed_model_reports_all_three_problems_in_one_check(fixture_results):
    _, result = fixture_results["mixed/model.py"]
    errors = sorted(d.rule for d in result.diagnostics if d.severity == "error")
    assert errors == ["ONNX101", "ONNX201", "ONNX201"]
    stages = {s.name: s.state.value for s in result.targets[0].stages}
    assert stages["capture"] == "failed" and stages["translate"] == "failed"


def test_messages_name_the_problem(fixture_results):
    def messages(name):
        return [d.message for d in fixture_results[name][1].diagnostics]

    assert any("aten::i0" in m for m in messages("no_translation/model.py"))
    assert any("aten::digamma" in m for m in messages("no_translation/model.py"))
    assert any("x.sum() > 0" in m for m in messages("data_dependent_branch/model.py"))
    assert any("x.shape[0]" in m and "guard `" in m
               for m in messages("dynamic_specialized/model.py"))
    # torch's suggestion is a fix to try (docs/fixes.md), never named untried
    assert not any("Dim.AUTO" in m for m in messages("dynamic_specialized/model.py"))
    assert any("Erf" in m and "NOT_IMPLEMENTED" in m
               for m in messages("ort_kernel_missing/model.py"))
    assert any("aten.gelu.default" in m for m in messages("wrong_translation/model.py"))
    assert any("Did you mean `dynamic_shapes`" in m for m in messages("malformed_pragma/model.py"))
    # a constant output is named with its place among the flattened outputs
    assert "returns a constant, 3 as output 3" in " ".join(messages("number_outputs/model.py"))
    assert "True as output 2" in " ".join(messages("number_outputs/model.py"))
    assert 'this call gives a list: torch.export stops with "Expecting `args` to be a tuple' \
        in " ".join(messages("export_call_inputs/model.py"))
    assert "`ListInputs.example_arguments()` returns a list as them" \
        in " ".join(messages("exportable_inputs/model.py"))
    assert {m for m in messages("no_outputs/model.py")} == {
        "The model returns no tensor (its forward gives `None`, or nothing but `None`), so the "
        "ONNX model has no outputs, and ONNX Runtime cannot create a session for a model "
        "without outputs."}
    assert [m for m in messages("size_functions/sizes.py") if "no ONNX translation" in m] == [
        "`round()` has no ONNX translation; the export fails here.",
        "`round()` has no ONNX translation; the export fails here.",
        "`torch._sym_sqrt` has no ONNX translation; the export fails here."]
    clash_hints = {d.location.range.start.line: d.hint
                   for d in fixture_results["name_clashes/model.py"][1].diagnostics}
    assert clash_hints == {
        line: f"Give each input and output a name of its own: {why}." for line, why in (
            (23, "`x` is in `input_names` twice"), (29, "`x` names an input and an output"),
            (42, "`weights` is in `output_names` twice"), (46, "`same` is in `output_names` twice"),
            (52, "`key` names an input and an output"))}


def test_a_module_left_in_training_mode_is_named_with_the_call_to_eval(fixture_results):
    """The hint at what a dropout or normalization in training mode computes names the module
    by its path and says to call `model.eval()`; the first divergence names the batch norm
    whose output a `getitem` takes, not `getitem`; a dropout the code asks for by itself
    keeps the usual hint."""
    hints = {(d.location.range.start.line, d.rule): d.hint or ""
             for d in fixture_results["training_mode/model.py"][1].diagnostics}
    eval_advice = "Call `model.eval()` before exporting a model for inference"
    for line, rule, module in ((17, "ONNX504", "`drop` (Dropout) is in training mode"),
                               (26, "ONNX502", "`features.1` (BatchNorm2d) is in training"),
                               (35, "ONNX504", "`proj.1` (AlphaDropout) is in training mode"),
                               (64, "ONNX501", "BatchNorm1d is in training mode"),
                               (77, "ONNX502", "`encoder.norm` (BatchNorm1d) is in training")):
        assert module in hints[line, rule] and eval_advice in hints[line, rule], (line, rule)
    assert "model.eval()" not in hints[100, "ONNX504"]
    (divergence,) = [d.message for d in fixture_results["training_mode/model.py"][1].diagnostics
                     if d.rule == "ONNX502" and d.location.range.start.line == 26]
    assert divergence.startswith(
        "The values first diverge at `aten._native_batch_norm_legit_functional.default` "
        "(output 0 of FX node `_native_batch_norm_legit_functional`)")


def test_problem_in_helper_module_links_back_to_the_target(fixture_results):
    workspace, result = fixture_results["helper_module/model.py"]
    (diagnostic,) = result.diagnostics
    related = [(r.location.path.relative_to(workspace).as_posix(), r.location.range.start.line,
                r.message) for r in diagnostic.related]
    assert related == [("layers/special.py", 10, "called from `smooth`"),
                       ("model.py", 10, "called from `forward`"),
                       ("model.py", 7, "while checking the export target `UsesHelper`")]


#: issue 38: each target of decorated_helpers/model.py, the chain of its one finding (path,
#: line, column, message), innermost caller first
DECORATED_CHAINS = {
    "InferenceHelper": [("model.py", 20, 16, "called from `forward`")],
    "Stacked": [("ops/wrappers.py", 8, 16, "called from `wrapper`"),
                ("model.py", 32, 16, "called from `forward`")],
    "Wrapped": [("ops/wrappers.py", 8, 16, "called from `wrapper`"),
                ("model.py", 45, 16, "called from `forward`")],
    "Managed": [("model.py", 57, 16, "called from `forward`")],
    "Autocast": [("model.py", 69, 16, "called from `middle`"),
                 ("model.py", 73, 16, "called from `forward`")],
    "Disabled": [("model.py", 84, 16, "called from `forward`")],
    "OtherModule": [("ops/special.py", 14, 12, "called from `scaled_gamma`"),
                    ("ops/wrappers.py", 8, 16, "called from `wrapper`"),
                    ("model.py", 91, 16, "called from `forward`"),
                    ("model.py", 88, 7, "while checking the export target `OtherModule`")],
}


def test_a_helper_under_decorators_is_located_at_its_line_with_every_caller(fixture_results):
    """Issue 38: torch's tracer keeps only the frames of `forward`s, and torch.onnx's
    decomposition leaves the nodes of a no_grad/inference_mode/autocast region with the
    region's generated code as their stack: every frame of the user's code survives now,
    through any number of decorators, the user's own wrappers included."""
    workspace, result = fixture_results["decorated_helpers/model.py"]
    chains = {}
    for target in result.targets:
        (diagnostic,) = target.diagnostics
        chains[target.name] = [(r.location.path.relative_to(workspace).as_posix(),
                                r.location.range.start.line, r.location.range.start.column,
                                r.message) for r in diagnostic.related]
    assert chains == DECORATED_CHAINS


def test_clean_models_pass_every_stage_and_match_pytorch(fixture_results):
    for name in ("clean/convnet.py", "clean/tokens.py"):
        (target,) = fixture_results[name][1].targets
        assert [s.state.value for s in target.stages] == ["passed"] * 7 + ["skipped"], name
        assert all(entry.matched for entry in target.summary.numerics)


def test_user_code_sees_real_stdio(fixture_results):
    """Issue 24: no stage stands a StringIO in for sys.stdout/sys.stderr any more, so
    ``faulthandler.enable()``, ``sys.stdout.reconfigure()``, ``sys.stdout.buffer`` and a
    subprocess given ``sys.stdout`` work in the user's code (they were ONNX002/ONNX004)."""
    for name in ("stdio/at_import.py", "stdio/in_forward.py", "stdio/noisy.py"):
        (target,) = fixture_results[name][1].targets
        assert target.diagnostics == [], name
        assert {s.state.value for s in target.stages[:-1]} == {"passed"}, name
        assert target.stages[-1].reason.startswith("no runtime named besides ort-cpu"), name


def test_names_and_dynamic_dims_reach_the_onnx_model(fixture_results):
    (convnet,) = fixture_results["clean/convnet.py"][1].targets
    assert convnet.summary.inputs == [TensorSummary("images", "float32", ("batch", 3, 16, 16))]
    assert convnet.summary.outputs == [TensorSummary("probabilities", "float32", ("batch", 5))]
    (tokens,) = fixture_results["clean/tokens.py"][1].targets
    assert [i.shape for i in tokens.summary.inputs] == [("batch", "length")] * 2


def test_weightless_check_skips_what_needs_weights(fixture_results):
    wide, _special = fixture_results["weightless/model.py"][1].targets
    states = {s.name: (s.state.value, s.reason) for s in wide.stages}
    assert states["validate"] == ("passed", "")
    for stage in ("runtime", "numerics", "dynamic"):
        assert states[stage][0] == "skipped" and "weights" in states[stage][1]
    assert wide.summary.parameters == 16 * (4096 * 4096 + 4096)


def test_a_weightless_transformers_model_exports_as_with_weights(fixture_results):
    """weights="none" runs the eager forward on meta tensors, and transformers' mask helpers
    read a value (`.item()`) outside tracing: no reason to call the model broken (a
    regression: ONNX004 on every Llama checked weight-free). Capture decides, as with real
    weights."""
    with_weights, weightless = fixture_results["weightless/llama.py"][1].targets
    assert (with_weights.name, weightless.name) == ("llama", "llama_weightless")
    for target in (with_weights, weightless):
        states = {s.name: s.state.value for s in target.stages}
        assert [states[s] for s in ("load", "capture", "translate", "validate")] == \
            ["passed"] * 4, target.name
    assert {s.name: s.state.value for s in weightless.stages}["runtime"] == "skipped"


def test_draft_only_graph_still_runs_later_stages(fixture_results):
    (target,) = fixture_results["data_dependent_branch/model.py"][1].targets
    states = {s.name: s.state.value for s in target.stages}
    assert states["capture"] == "failed"
    assert states["translate"] == states["runtime"] == states["numerics"] == "passed"


def test_a_lazy_modules_parameters_are_counted_once_its_forward_made_them(fixture_results):
    """``nn.LazyLinear`` and its kin get their parameters at the first forward: the summary
    counts them after the eager forward, and leaves out one the forward never reached."""
    targets = {t.name: t for t in fixture_results["lazy_modules/model.py"][1].targets}
    assert {name: t.summary.parameters for name, t in targets.items()} == {
        "LazyHead": 8 * 4 + 4, "LazyStem": 3 * 6 * 9 + 6 + 2 * 6,
        "nested_lazy": 10 * 16 + 16 + 16 * 2 + 2, "LazyGate": 6 * 6 + 6, "UnusedLazy": 8 * 4 + 4}
    assert [name for name, t in targets.items() if t.ok] == [
        "LazyHead", "LazyStem", "nested_lazy", "UnusedLazy"]


def test_a_model_that_fails_in_eager_pytorch_has_its_parameters_counted(fixture_results):
    (target,) = fixture_results["eager_failure/model.py"][1].targets
    assert not target.ok and target.summary.parameters == 8 * 2 + 2
