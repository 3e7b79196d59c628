"""Which outputs are drawn from random numbers (exporter/pipeline/random_draws.py), in the
exported graph as torch tags its operators and in the ONNX model. The checks built on it are
judged on tests/exporter/fixtures/random_draws against the plain exporter by the corpus."""

from __future__ import annotations

import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper
from torch import nn

from exporter.pipeline.random_draws import onnx_random_values, random_outputs


def _program(model: nn.Module, *args: torch.Tensor) -> torch.export.ExportedProgram:
    return torch.export.export(model, args).run_decompositions()


class _TwoDraws(nn.Module):
    def forward(self, x):
        h = x * 3
        noisy = h + torch.randn_like(h)
        return noisy + torch.rand_like(h), h * 2, noisy.sum()


def test_each_output_that_depends_on_a_draw_names_the_first_draw():
    program = _program(_TwoDraws(), torch.randn(2, 3))
    found = random_outputs(program)
    assert sorted(found) == [0, 2]
    assert found[0] is found[2]
    assert "randn" in str(found[0].target)


class _Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.4)
        self.lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3, batch_first=True)

    def forward(self, x):
        attended = F.scaled_dot_product_attention(x, x, x,
                                                  dropout_p=0.2 if self.training else 0.0)
        return self.drop(x), self.lstm(x)[0], attended


def test_dropout_recurrent_layers_and_attention_draw_only_in_training():
    x = torch.randn(1, 2, 3, 4)
    assert random_outputs(_program(_Layers().eval(), x[0])) == {}
    assert random_outputs(torch.export.export(_Layers().eval(), (x[0],))) == {}
    # before decompositions: aten.lstm's `train` and `dropout` (its decomposition, which
    # the ONNX translation sees, leaves the dropout out: compared, as a wrong translation)
    trained = torch.export.export(_Layers().train(), (x[0],))
    assert sorted(random_outputs(trained)) == [0, 1, 2]


class _Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen.add_(1)
        return x * 2, x + torch.rand(x.shape)


def test_an_output_keeps_its_index_after_a_mutated_buffer():
    # the graph returns the buffer's new value first; the ONNX model only the user's outputs
    assert list(random_outputs(_program(_Counted(), torch.randn(3)))) == [1]


def _model(nodes, outputs, initializers=(), functions=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in outputs],
        initializer=list(initializers))
    return helper.make_model(graph, functions=list(functions),
                             opset_imports=[helper.make_opsetid("", 18),
                                            helper.make_opsetid("local", 1)])


def _flag(name, value):
    return helper.make_tensor(name, TensorProto.BOOL, [], [value])


def test_onnx_values_downstream_of_a_drawing_operator():
    model = _model([helper.make_node("RandomNormalLike", ["x"], ["noise"]),
                    helper.make_node("Add", ["x", "noise"], ["noisy"]),
                    helper.make_node("Relu", ["x"], ["plain"])], ["noisy", "plain"])
    assert onnx_random_values(model) == {"noise", "noisy"}


def test_onnx_dropout_draws_only_in_training_mode():
    ratio = helper.make_tensor("ratio", TensorProto.FLOAT, [], [0.5])
    model = _model([helper.make_node("Dropout", ["x", "ratio", "off"], ["eval"]),
                    helper.make_node("Dropout", ["x", "ratio", "on"], ["train"]),
                    helper.make_node("Dropout", ["x"], ["default"])],
                   ["eval", "train", "default"],
                   initializers=[ratio, _flag("off", False), _flag("on", True)])
    onnx.checker.check_model(model)
    assert onnx_random_values(model) == {"train"}


def test_onnx_draws_inside_a_subgraph_or_a_local_function():
    then_branch = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["u"], shape=[2])], "then", [],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [2])])
    else_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["z"], value=helper.make_tensor(
            "z", TensorProto.FLOAT, [2], [0.0, 0.0]))], "else", [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    sample = helper.make_function("local", "Sample", ["p"], ["s"],
                                  [helper.make_node("Bernoulli", ["p"], ["s"])],
                                  [helper.make_opsetid("", 18)])
    model = _model([helper.make_node("Constant", [], ["cond"], value=_flag("c", True)),
                    helper.make_node("If", ["cond"], ["branched"], then_branch=then_branch,
                                     else_branch=else_branch),
                    helper.make_node("Sample", ["x"], ["sampled"], domain="local"),
                    helper.make_node("Neg", ["x"], ["negated"])],
                   ["branched", "sampled", "negated"], functions=[sample])
    assert onnx_random_values(model) == {"branched", "sampled"}
