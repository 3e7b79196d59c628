"""An eager run of onnxlens's leaves the model as it was built (exporter/pipeline/model_state.py):
what the exporter then captures, and where every later eager run starts. The checks of such
models: tests/exporter/fixtures/stateful_forward, judged against the plain exporter by the
corpus."""

from __future__ import annotations

import collections

import torch
from torch import nn

from exporter.pipeline.model_state import ModelState, state_kept


def _run(model: nn.Module, *args: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), state_kept(model):
        result: torch.Tensor = model(*args)
    return result


class _Stateful(nn.Module):
    """Every kind of state a forward changes, on a submodule too."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.seen: list[int] = []
        self.shared = {"sizes": [1, 2]}
        self.cache: torch.Tensor | None = None
        self.register_buffer("total", torch.zeros(3))
        self.inner = nn.Linear(3, 3)
        self.inner.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.seen.append(x.shape[0])
        self.shared["sizes"].append(3)
        self.cache = x.sum(dim=0)
        self.total.add_(x.sum(dim=0))
        self.inner.scale = self.inner.scale * 2
        self.made_here = True
        self.register_buffer("extra", torch.ones(1))
        with torch.no_grad():
            self.inner.weight.mul_(2)
        return self.inner(x) * self.calls * self.inner.scale + self.total


def test_every_run_starts_from_the_model_as_built() -> None:
    torch.manual_seed(0)
    model = _Stateful().eval()
    weight = model.inner.weight.detach().clone()
    x = torch.randn(4, 3)
    first = _run(model, x)
    assert torch.equal(_run(model, x), first)  # without state_kept: twice the calls, ...
    assert model.calls == 0 and model.seen == [] and model.shared == {"sizes": [1, 2]}
    assert model.cache is None and model.inner.scale == 1.0
    assert not hasattr(model, "made_here") and "extra" not in dict(model.named_buffers())
    assert torch.equal(model.total, torch.zeros(3))
    assert torch.equal(model.inner.weight, weight)


def test_what_the_run_did_not_change_keeps_its_identity() -> None:
    model = _Stateful()
    unchanged = [1, 2]
    model.inner.options = unchanged
    model.also = unchanged  # the same list held twice stays the same list
    total, weight = model.total, model.inner.weight
    _run(model, torch.randn(2, 3))
    assert model.inner.options is unchanged and model.also is unchanged
    assert model.total is total and model.inner.weight is weight


def test_a_lazy_module_keeps_the_parameters_its_first_forward_made() -> None:
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU())
    _run(model, torch.randn(2, 5))
    linear = model[0]
    assert isinstance(linear, nn.Linear) and linear.weight.shape == (4, 5)
    assert not nn.parameter.is_lazy(linear.weight)
    weight = linear.weight.detach().clone()
    _run(model, torch.randn(2, 5))
    assert torch.equal(linear.weight, weight)


def test_a_failing_run_also_leaves_the_model_as_built() -> None:
    class Failing(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            raise ValueError("the model's own error")

    model = Failing()
    try:
        _run(model, torch.randn(1))
    except ValueError:
        pass
    assert model.calls == 0


def test_a_model_without_values_is_run_as_it_is() -> None:
    with torch.device("meta"):
        model = nn.Linear(3, 2)
    with state_kept(model):
        out = model(torch.randn(4, 3, device="meta"))
    assert out.shape == (4, 2) and model.weight.is_meta


def test_a_model_made_under_inference_mode_is_run_and_put_back() -> None:
    """Inference tensors count no versions, and an expanded buffer cannot be written: both
    failed the eager forward (ONNX004) of models built under ``torch.inference_mode``."""
    with torch.inference_mode():
        model = nn.Linear(3, 3)
        model.register_buffer("spread", torch.ones(1).expand(3))
        model.register_buffer("seen", torch.zeros(3))
    original = model.weight.clone()

    def counting(module: nn.Module, inputs: tuple[torch.Tensor]) -> None:
        module.seen.add_(1)

    model.register_forward_pre_hook(counting)
    with torch.inference_mode(), state_kept(model):
        model(torch.randn(2, 3))
        assert torch.equal(model.seen, torch.ones(3))
    assert torch.equal(model.seen, torch.zeros(3)) and torch.equal(model.weight, original)
    assert torch.equal(model.spread, torch.ones(3))


class _Tracker:
    def __init__(self) -> None:
        self.steps = 0
        self.log: list[int] = []


class _HeldState(nn.Module):
    """State in containers of other types and in plain objects, one held in a list."""

    def __init__(self) -> None:
        super().__init__()
        self.ordered: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        self.recent: collections.deque[float] = collections.deque([1.0], maxlen=3)
        self.trackers = [_Tracker()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ordered[len(self.ordered)] = 1
        self.counts["calls"] += 1
        self.recent.append(self.recent[-1] + 1)
        tracker = self.trackers[0]
        tracker.steps += 1
        tracker.log.append(tracker.steps)
        tracker.added = True
        return x * (len(self.ordered) + self.counts["calls"] + sum(self.recent) + tracker.steps)


def test_other_containers_and_plain_objects_are_put_back() -> None:
    model = _HeldState()
    tracker = model.trackers[0]
    x = torch.ones(2)
    first = _run(model, x)
    assert torch.equal(_run(model, x), first)
    assert model.ordered == {} and isinstance(model.ordered, collections.OrderedDict)
    assert dict(model.counts) == {} and model.counts["new"] == 0  # still a defaultdict(int)
    assert list(model.recent) == [1.0] and model.recent.maxlen == 3
    assert model.trackers[0] is tracker and vars(tracker) == {"steps": 0, "log": []}


def test_runs_from_the_state_as_built_start_there_however_often() -> None:
    """The state taken before the first run is put back before and after each run, also over
    what happened in between (the capture's tracing): its saved copies are never handed out."""
    model = _HeldState()
    as_built = ModelState.of(model)
    x = torch.ones(2)
    with state_kept(model, as_built):
        first = model(x)
    model(x)  # between the runs, as torch.export's tracing of a forward does
    for _ in range(3):
        with state_kept(model, as_built):
            assert torch.equal(model(x), first)
    assert vars(model.trackers[0]) == {"steps": 0, "log": []} and list(model.recent) == [1.0]



class _ReturnsItsState(nn.Module):
    """A forward that updates a buffer in place and returns it, a view of it, and a value
    computed from it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        self.acc.add_(x)
        return {"acc": self.acc, "head": (self.acc[:2],), "scaled": self.acc * 2}


def test_outputs_that_are_the_state_keep_the_values_the_run_gave() -> None:
    model = _ReturnsItsState()
    x = torch.arange(4.0)
    with torch.no_grad(), state_kept(model) as kept:
        outputs = kept.outputs_apart(model(x))
    assert torch.equal(model.acc, torch.zeros(4))  # the state is put back ...
    assert torch.equal(outputs["acc"], x)  # ... and the outputs are what the run returned
    assert torch.equal(outputs["head"][0], x[:2])
    assert torch.equal(outputs["scaled"], x * 2)
    assert outputs["acc"].untyped_storage().data_ptr() != model.acc.untyped_storage().data_ptr()


class _SparseState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("heads", torch.eye(3).to_sparse(), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + 1, self.heads


def test_tensors_without_storage_of_their_own_are_outputs_as_they_are() -> None:
    model = _SparseState()
    with torch.no_grad(), state_kept(model) as kept:
        dense, sparse = kept.outputs_apart(model(torch.zeros(3)))
    assert torch.equal(dense, torch.ones(3)) and sparse is model.heads
