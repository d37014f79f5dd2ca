"""The heap freezer: long-lived objects leave the cycle collector's full passes, and a
periodic thaw still reclaims cycles that died while frozen."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from gharc.kube.heapfreeze import keep_heap_frozen

pytestmark = pytest.mark.looptime


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


async def test_the_heap_is_frozen_at_once_and_again_on_every_tick() -> None:
    gc.unfreeze()
    task = asyncio.create_task(keep_heap_frozen(every=60.0, thaw_every=3600.0))
    await asyncio.sleep(0)
    assert gc.get_freeze_count() > 0
    kept = [Node() for _ in range(100)]  # made after the first freeze: not frozen yet
    frozen_before = gc.get_freeze_count()
    await asyncio.sleep(61)
    assert gc.get_freeze_count() >= frozen_before + len(kept)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gc.get_freeze_count() == 0, "a stopped freezer leaves the heap unfrozen"


async def test_a_cycle_that_died_while_frozen_is_reclaimed_by_the_thaw() -> None:
    gc.unfreeze()
    dead = _cycle()  # garbage already, but only the cycle collector can free it
    task = asyncio.create_task(keep_heap_frozen(every=60.0, thaw_every=180.0))
    await asyncio.sleep(0)
    gc.collect()
    assert dead() is not None, "a frozen cycle is out of the collector's sight"
    await asyncio.sleep(121)
    gc.collect()
    assert dead() is not None, "no thaw before thaw_every"
    await asyncio.sleep(60)  # the tick at 180 s thaws, collects and freezes again
    assert dead() is None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
