"""Which checks run now (lsp_server/admission.py): at most ``slots`` at once, within the memory
budget, the document in front of the user first."""

from __future__ import annotations

import asyncio

import pytest

from lsp_server.admission import OPEN_SETTLE_SECONDS, CheckQueue, Focus


class Checks:
    """Checks that hold their place in ``queue`` until released, and the order they started."""

    def __init__(self, queue: CheckQueue) -> None:
        self.queue = queue
        self.started: list[str] = []
        self.running: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def request(self, uri: str, estimate_mb: int = 100, opened: bool = False) -> None:
        self.tasks[uri] = asyncio.create_task(self._check(uri, estimate_mb, opened))

    async def _check(self, uri: str, estimate_mb: int, opened: bool) -> None:
        async with self.queue.slot(uri, estimate_mb, opened):
            self.started.append(uri)
            self.running[uri] = asyncio.Event()
            await self.running[uri].wait()
        del self.running[uri]

    async def finish(self, uri: str) -> None:
        self.running[uri].set()
        await self.tasks[uri]
        await settled()

    async def cancel(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)


@pytest.fixture
async def new_checks():
    """``new_checks(queue)``: checks on ``queue``; those still waiting or running when the
    test ends are cancelled (not left to the garbage collector)."""
    made: list[Checks] = []

    def new(queue: CheckQueue) -> Checks:
        made.append(Checks(queue))
        return made[-1]

    yield new
    for checks in made:
        await checks.cancel()


async def settled() -> None:
    """Let the queue admit what it can and the admitted checks start."""
    for _ in range(10):
        await asyncio.sleep(0)


def in_order(*uris: str):
    """A priority that ranks ``uris`` in the order given (the others after them)."""
    return lambda uri: (uris.index(uri) if uri in uris else len(uris), 0.0)


def queue(priority=None, slots: int = 1, budget_mb: int = 4096) -> CheckQueue:
    return CheckQueue(priority or in_order(), lambda: None, slots=slots, budget_mb=budget_mb)


async def test_no_more_checks_run_than_there_are_slots(new_checks):
    checks = new_checks(queue(slots=2))
    for uri in "abcd":
        checks.request(uri)
    await settled()
    assert checks.started == ["a", "b"]
    await checks.finish("a")
    assert checks.started == ["a", "b", "c"]
    await checks.finish("b")
    await checks.finish("c")
    await checks.finish("d")
    assert checks.queue.most_running == 2


async def test_waiting_checks_start_in_priority_order_then_in_the_order_requested(new_checks):
    checks = new_checks(queue(in_order("blocker", "c", "a"), slots=1))
    checks.request("blocker")
    await settled()
    for uri in ["a", "b", "c", "d"]:
        checks.request(uri)
    await settled()
    assert [checks.queue.position(uri) for uri in "abcd"] == [2, 3, 1, 4]
    for uri in ["blocker", "c", "a", "b", "d"]:
        await checks.finish(uri)
    assert checks.started == ["blocker", "c", "a", "b", "d"]


async def test_a_change_of_focus_reorders_what_waits(new_checks):
    focus = Focus()
    checks = new_checks(queue(lambda uri: focus.priority(uri, is_open=True), slots=1))
    for uri in ["blocker", "a", "b", "c"]:
        focus.touch(uri)
        checks.request(uri)
        await settled()
    assert [checks.queue.position(uri) for uri in "abc"] == [3, 2, 1]  # the latest first
    focus.active = "a"
    checks.queue.reorder()
    assert [checks.queue.position(uri) for uri in "abc"] == [1, 3, 2]
    await checks.finish("blocker")
    assert checks.started == ["blocker", "a"]


def test_the_active_editor_comes_first_then_the_visible_ones_then_by_recency():
    focus = Focus(active="active", visible=frozenset({"visible"}))
    for uri in ["visible", "old", "recent", "active"]:
        focus.touch(uri)
    order = sorted(["unopened", "old", "visible", "recent", "active"],
                   key=lambda uri: focus.priority(uri, is_open=uri != "unopened"))
    assert order == ["active", "visible", "recent", "old", "unopened"]
    focus.forget("recent")  # closed: its recency no longer counts
    assert focus.priority("recent", is_open=True) > focus.priority("old", is_open=True)


async def test_a_check_starts_only_while_the_memory_budget_holds_it(new_checks):
    checks = new_checks(queue(slots=4, budget_mb=1000))
    checks.request("a", estimate_mb=600)
    checks.request("b", estimate_mb=600)
    await settled()
    assert checks.started == ["a"]  # a slot is free, the memory is not
    await checks.finish("a")
    assert checks.started == ["a", "b"]


async def test_the_head_of_the_queue_is_not_overtaken_by_smaller_checks(new_checks):
    checks = new_checks(queue(slots=4, budget_mb=1000))
    checks.request("running", estimate_mb=500)
    checks.request("big", estimate_mb=600)
    checks.request("small", estimate_mb=100)
    await settled()
    assert checks.started == ["running"]  # "small" fits, but waits behind "big"
    await checks.finish("running")
    assert checks.started == ["running", "big", "small"]


async def test_a_check_larger_than_the_whole_budget_runs_alone(new_checks):
    checks = new_checks(queue(slots=4, budget_mb=1000))
    checks.request("huge", estimate_mb=5000)
    checks.request("small", estimate_mb=10)
    await settled()
    assert checks.started == ["huge"]
    await checks.finish("huge")
    assert checks.started == ["huge", "small"]


async def test_more_slots_admit_what_waits_at_once(new_checks):
    checks = new_checks(queue(slots=1))
    for uri in "abc":
        checks.request(uri)
    await settled()
    assert checks.started == ["a"]
    checks.queue.configure(slots=3, budget_mb=4096)
    await settled()
    assert checks.started == ["a", "b", "c"]


async def test_a_cancelled_wait_leaves_the_queue(new_checks):
    checks = new_checks(queue(slots=1))
    for uri in "abc":
        checks.request(uri)
    await settled()
    checks.tasks["b"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await checks.tasks["b"]
    assert checks.queue.position("b") is None and checks.queue.position("c") == 1
    await checks.finish("a")
    assert checks.started == ["a", "c"]


async def test_documents_opened_in_a_burst_are_all_queued_before_one_is_admitted(new_checks):
    checks = new_checks(queue(in_order("active"), slots=1))
    checks.request("first", opened=True)
    await settled()
    checks.request("active", opened=True)
    await settled()
    assert checks.started == []  # still being opened: nothing admitted
    assert checks.queue.position("first") is None  # nor shown as queued
    await asyncio.sleep(OPEN_SETTLE_SECONDS * 4)
    await settled()
    assert checks.started == ["active"]  # the active one, though opened after "first"
    assert checks.queue.position("first") == 1
    await checks.finish("active")
    await checks.finish("first")
