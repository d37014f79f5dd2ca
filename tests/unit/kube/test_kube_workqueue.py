"""The work queue's contract: de-duplication, one worker per key, delays without polling."""

from __future__ import annotations

import asyncio

import pytest

from gharc.kube.ratelimit import ItemExponentialFailureRateLimiter
from gharc.kube.workqueue import ShutDown, WorkQueue


async def test_an_item_added_twice_is_handed_out_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_an_item_in_flight_is_not_handed_to_a_second_worker() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    first = await q.get()
    q.add("a")  # changed again while being processed
    assert len(q) == 0, "must not be queued while in flight"
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not second.done()
    q.done(first)
    assert await asyncio.wait_for(second, 1) == "a", "re-added while processing: process again"


async def test_done_without_a_readd_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0


async def test_items_come_out_in_fifo_order() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(5):
        q.add(i)
    assert [await q.get() for _ in range(5)] == [0, 1, 2, 3, 4]


async def test_a_waiting_getter_is_woken_by_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")
    assert await asyncio.wait_for(getter, 1) == "x"


async def test_a_cancelled_getter_does_not_swallow_the_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    g1 = asyncio.create_task(q.get())
    g2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")  # wakes g1 ...
    g1.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(g2, 1) == "x"


@pytest.mark.looptime
async def test_delayed_items_appear_in_order_of_their_due_time() -> None:
    loop = asyncio.get_running_loop()
    q: WorkQueue[str] = WorkQueue()
    start = loop.time()
    q.add_after("late", 10)
    q.add_after("early", 2)
    q.add_after("middle", 5)
    assert len(q) == 0 and q.delayed == 3
    seen = []
    for _ in range(3):
        seen.append((await q.get(), round(loop.time() - start, 3)))
    assert seen == [("early", 2.0), ("middle", 5.0), ("late", 10.0)]


@pytest.mark.looptime
async def test_the_earlier_of_two_delays_for_one_item_wins() -> None:
    loop = asyncio.get_running_loop()
    q: WorkQueue[str] = WorkQueue()
    start = loop.time()
    q.add_after("a", 30)
    q.add_after("a", 3)
    q.add_after("a", 60)
    assert q.delayed == 1
    assert await q.get() == "a"
    assert loop.time() - start == pytest.approx(3)
    q.done("a")
    await asyncio.sleep(100)
    assert len(q) == 0, "the later schedules were dropped"


@pytest.mark.looptime
async def test_a_delayed_item_already_queued_is_not_duplicated() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add_after("a", 1)
    await asyncio.sleep(2)
    assert len(q) == 1


@pytest.mark.looptime
async def test_add_rate_limited_backs_off_exponentially_until_forget() -> None:
    loop = asyncio.get_running_loop()
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(
        base_delay=1.0, max_delay=100.0
    )
    q: WorkQueue[str] = WorkQueue(rate_limiter=limiter)
    waits = []
    for _ in range(4):
        began = loop.time()
        q.add_rate_limited("a")
        item = await q.get()
        waits.append(round(loop.time() - began, 3))
        q.done(item)
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    began = loop.time()
    q.add_rate_limited("a")
    await q.get()
    assert loop.time() - began == pytest.approx(1.0)


async def test_shutdown_stops_getters_and_refuses_new_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shutdown()
    with pytest.raises(ShutDown):
        await getter
    q.add("a")
    assert len(q) == 0
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_leaves_the_backlog_untaken() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shutdown()
    with pytest.raises(ShutDown):
        await q.get()


@pytest.mark.looptime
async def test_shutdown_cancels_pending_delays() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 1)
    q.shutdown()
    await asyncio.sleep(5)
    assert len(q) == 0


async def test_wait_idle_returns_when_in_flight_items_are_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await q.get()
    waiter = asyncio.create_task(q.wait_idle())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.done(item)
    await asyncio.wait_for(waiter, 1)


@pytest.mark.looptime
async def test_many_delayed_items_use_a_single_timer() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(1000):
        q.add_after(i, 1 + (i % 10))
    assert q._timer is not None  # one loop timer for the whole heap
    await asyncio.sleep(11)
    assert len(q) == 1000


async def test_one_tenants_burst_does_not_put_another_tenant_last() -> None:
    """400 runners of team-a are queued before team-b's one: team-b's is handed out second,
    and team-a's keep their own order."""
    q: WorkQueue[tuple[str, str]] = WorkQueue(fair_key=lambda item: item[0])
    for i in range(400):
        q.add(("team-a", f"runner-{i}"))
    q.add(("team-b", "runner-0"))
    q.add(("team-c", "runner-0"))
    got = [await q.get() for _ in range(6)]
    assert got == [
        ("team-a", "runner-0"),
        ("team-b", "runner-0"),
        ("team-c", "runner-0"),
        ("team-a", "runner-1"),
        ("team-a", "runner-2"),
        ("team-a", "runner-3"),
    ]
    assert len(q) == 396


async def test_without_a_fair_key_the_queue_is_one_fifo() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue()
    for item in [("a", "1"), ("a", "2"), ("b", "1")]:
        q.add(item)
    assert [await q.get() for _ in range(3)] == [("a", "1"), ("a", "2"), ("b", "1")]


def _tenant_queue(workers: int) -> WorkQueue[tuple[str, str]]:
    return WorkQueue(fair_key=lambda item: item[0], workers=workers)


async def test_a_burst_leaves_the_last_eighth_of_the_workers_to_other_tenants() -> None:
    """16 workers: team-a's burst may hold 14; the last 2 wait for a tenant that holds
    none, and one starts at once when it comes (it did not before: team-a took all 16)."""
    q = _tenant_queue(16)
    for i in range(100):
        q.add(("team-a", f"runner-{i}"))
    held = [await q.get() for _ in range(14)]
    assert {team for team, _ in held} == {"team-a"}
    spare = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not spare.done(), "team-a holds 14 of 16 workers: the rest are kept"
    q.add(("team-b", "runner-0"))
    assert await asyncio.wait_for(spare, 1) == ("team-b", "runner-0")
    last = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not last.done(), "the 16th worker is kept too, for a third tenant"
    q.add(("team-c", "runner-0"))
    assert await asyncio.wait_for(last, 1) == ("team-c", "runner-0")


async def test_a_kept_worker_goes_back_to_the_burst_when_one_of_its_items_is_done() -> None:
    q = _tenant_queue(8)
    for i in range(20):
        q.add(("team-a", f"runner-{i}"))
    held = [await q.get() for _ in range(7)]
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiting.done()
    q.done(held[0])
    assert await asyncio.wait_for(waiting, 1) == ("team-a", "runner-7")


async def test_a_tenant_that_holds_no_worker_is_served_before_busy_ones_in_turn() -> None:
    """With the shared workers taken, the first tenant in turn that holds none goes next;
    the busy tenants passed over keep their places."""
    q = _tenant_queue(8)
    for i in range(10):
        q.add(("team-a", f"runner-{i}"))
    held = [await q.get() for _ in range(7)]
    q.add(("team-c", "runner-0"))
    assert await q.get() == ("team-c", "runner-0")
    for item in held:
        q.done(item)
    q.add(("team-d", "runner-0"))
    assert [await q.get() for _ in range(3)] == [
        ("team-a", "runner-7"),
        ("team-d", "runner-0"),
        ("team-a", "runner-8"),
    ]


async def test_fewer_than_eight_workers_keep_none_back() -> None:
    q = _tenant_queue(4)
    for i in range(4):
        q.add(("team-a", f"runner-{i}"))
    assert [await q.get() for _ in range(4)] == [("team-a", f"runner-{i}") for i in range(4)]
