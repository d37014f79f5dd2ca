"""Controller semantics at the queue level: no Kubernetes needed, none faked."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest

from gharc.kube import errors as kerrors
from gharc.kube.controller import Controller
from gharc.kube.ratelimit import ItemExponentialFailureRateLimiter
from gharc.kube.reconcile import Request, Result, TerminalError
from gharc.kube.shardfence import NotOwner

A = Request("ns", "a")
B = Request("ns", "b")


class Recorder:
    """Counts concurrent reconciles per key and overall; behaviour set per test."""

    def __init__(self, *, hold: float = 0.0) -> None:
        self.hold = hold
        self.active: Counter[Request] = Counter()
        self.max_active_per_key: Counter[Request] = Counter()
        self.max_active = 0
        self.calls: list[tuple[Request, float]] = []
        self.outcomes: dict[Request, list[object]] = {}

    async def reconcile(self, request: Request) -> Result | None:
        loop = asyncio.get_running_loop()
        self.calls.append((request, loop.time()))
        self.active[request] += 1
        self.max_active_per_key[request] = max(
            self.max_active_per_key[request], self.active[request]
        )
        self.max_active = max(self.max_active, sum(self.active.values()))
        try:
            await asyncio.sleep(self.hold)
            plan = self.outcomes.get(request)
            outcome = plan.pop(0) if plan else None
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome  # type: ignore[return-value]
        finally:
            self.active[request] -= 1


async def _run(controller: Controller) -> asyncio.Task[None]:
    task = asyncio.create_task(controller.start())
    assert await controller.wait_started(5)
    return task


async def _stop(controller: Controller, task: asyncio.Task[None]) -> None:
    await controller.stop()
    await asyncio.wait_for(task, 5)


@pytest.mark.looptime
async def test_a_key_is_never_reconciled_twice_at_once() -> None:
    rec = Recorder(hold=1.0)
    ctl = Controller("never-twice", rec, max_concurrent_reconciles=8)
    task = await _run(ctl)
    for _ in range(20):
        ctl.queue.add(A)
        ctl.queue.add(B)
        await asyncio.sleep(0.3)
    await asyncio.sleep(3)
    await _stop(ctl, task)
    assert rec.max_active_per_key[A] == 1
    assert rec.max_active_per_key[B] == 1
    assert rec.max_active == 2, "different keys do run concurrently"
    # Adds during a reconcile merge into one follow-up: fewer calls than adds, and the
    # last add is always followed by a reconcile that started after it.
    assert 5 <= sum(1 for r, _ in rec.calls if r == A) < 20


@pytest.mark.looptime
async def test_workers_are_bounded_by_max_concurrent_reconciles() -> None:
    rec = Recorder(hold=1.0)
    ctl = Controller("bounded", rec, max_concurrent_reconciles=3)
    task = await _run(ctl)
    for i in range(10):
        ctl.queue.add(Request("ns", f"k{i}"))
    await asyncio.sleep(5)
    await _stop(ctl, task)
    assert rec.max_active == 3
    assert len(rec.calls) == 10


@pytest.mark.looptime
async def test_an_exception_requeues_with_growing_backoff_then_success_forgets() -> None:
    rec = Recorder()
    rec.outcomes[A] = [RuntimeError("boom"), RuntimeError("boom"), RuntimeError("boom"), None]
    limiter: ItemExponentialFailureRateLimiter[Request] = ItemExponentialFailureRateLimiter(
        base_delay=1.0, max_delay=60.0
    )
    ctl = Controller("errors", rec, rate_limiter=limiter)
    task = await _run(ctl)
    ctl.queue.add(A)
    await asyncio.sleep(30)
    await _stop(ctl, task)
    times = [t for r, t in rec.calls if r == A]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(times)]
    assert gaps == [1.0, 2.0, 4.0]
    assert ctl.queue.num_requeues(A) == 0, "success resets the backoff"


@pytest.mark.looptime
async def test_a_terminal_error_is_not_retried() -> None:
    rec = Recorder()
    rec.outcomes[A] = [TerminalError("invalid spec")]
    ctl = Controller("terminal", rec)
    task = await _run(ctl)
    ctl.queue.add(A)
    await asyncio.sleep(100)
    await _stop(ctl, task)
    assert len(rec.calls) == 1


@pytest.mark.looptime
async def test_a_conflict_is_retried_like_any_error() -> None:
    rec = Recorder()
    rec.outcomes[A] = [kerrors.Conflict("stale"), None]
    ctl = Controller("conflict", rec)
    task = await _run(ctl)
    ctl.queue.add(A)
    await asyncio.sleep(1)
    await _stop(ctl, task)
    assert len(rec.calls) == 2


@pytest.mark.looptime
async def test_requeue_after_schedules_the_key_and_resets_the_backoff() -> None:
    rec = Recorder()
    rec.outcomes[A] = [RuntimeError("x"), Result(requeue_after=42), None]
    ctl = Controller("requeue-after", rec)
    task = await _run(ctl)
    ctl.queue.add(A)
    await asyncio.sleep(100)
    await _stop(ctl, task)
    times = [t for _, t in rec.calls]
    assert len(times) == 3
    assert times[2] - times[1] == pytest.approx(42)
    assert ctl.queue.num_requeues(A) == 0


@pytest.mark.looptime
async def test_stop_lets_the_in_flight_reconcile_finish_and_takes_no_more() -> None:
    rec = Recorder(hold=10)
    ctl = Controller("graceful", rec)
    task = await _run(ctl)
    ctl.queue.add(A)
    ctl.queue.add(B)
    await asyncio.sleep(1)
    await ctl.stop()
    await asyncio.wait_for(task, 20)
    assert [r for r, _ in rec.calls] == [A]
    assert rec.active[A] == 0, "A ran to completion"


async def test_reconcile_handler_reports_the_result_label() -> None:
    rec = Recorder()
    rec.outcomes[A] = [Result(requeue_after=5), Result(requeue=True), ValueError("x"), None]
    ctl = Controller("labels", rec)
    labels = [await ctl.reconcile_handler(A) for _ in range(4)]
    assert labels == ["requeue_after", "requeue", "error", "success"]


async def test_a_fenced_write_is_requeued_without_a_stack_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A write the fence refused is no fault of the object or of the code: one line at
    INFO, requeued like any error (whoever holds the object now reconciles it)."""
    rec = Recorder()
    rec.outcomes[A] = [NotOwner("PATCH of shard 3 refused: this replica no longer holds it")]
    ctl = Controller("fenced", rec)
    with caplog.at_level("INFO", logger="gharc.kube.controller"):
        assert await ctl.reconcile_handler(A) == "error"
    [record] = [r for r in caplog.records if "stopped before a write" in r.getMessage()]
    assert record.levelname == "INFO" and record.exc_info is None, record
    assert "no longer holds it" in record.getMessage()
    assert ctl.queue.num_requeues(A) == 1
