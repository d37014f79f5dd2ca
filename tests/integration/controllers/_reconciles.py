"""How often a controller in this process reconciled: for tests of what wakes it."""

from __future__ import annotations

import asyncio

from gharc.kube import metrics


def reconcile_count(controller: str) -> float:
    """Reconciles of ``controller`` in this process so far, every result."""
    return sum(
        sample.value
        for family in metrics.RECONCILE_TOTAL.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("controller") == controller
    )


async def settled_count(controller: str, quiet: float = 2.0, rounds: int = 30) -> float:
    """Wait until ``controller`` has not reconciled for ``quiet`` seconds; its count then."""
    count = reconcile_count(controller)
    for _ in range(rounds):
        await asyncio.sleep(quiet)
        now = reconcile_count(controller)
        if now == count:
            return count
        count = now
    raise AssertionError(f"the {controller} reconciler never settled")
