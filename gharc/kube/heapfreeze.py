"""Keep the cycle collector's full passes short: what has lived a while is frozen.

A full (generation 2) collection walks every tracked object. At 1,000 scale sets the
controller tracks ~330,000 of them (mostly its caches), and one pass held the event loop
0.2-0.34 s, every tenant's reconciles and listeners with it, a few times a minute while
sets were created and once or twice in a 200-job stream: the tail of pickup latency and of
``gharc_event_loop_lag_seconds``. Objects that have lived until now are mostly cached
Kubernetes objects, plain dicts that die by reference counting when replaced, never in a
cycle. So every ``every`` seconds :func:`gc.freeze` moves them out of the collector's
sight, and full passes only walk what is younger.

A frozen object that later dies inside a reference cycle is never reclaimed while frozen,
so every ``thaw_every`` seconds everything is unfrozen and collected once (one full pause
an hour instead of several a minute under load), then frozen again.
"""

from __future__ import annotations

import asyncio
import gc
import logging

__all__ = ["keep_heap_frozen"]

log = logging.getLogger(__name__)

FREEZE_EVERY = 60.0
THAW_EVERY = 3600.0


async def keep_heap_frozen(every: float = FREEZE_EVERY, thaw_every: float = THAW_EVERY) -> None:
    """Freeze the heap now and every ``every`` seconds; thaw and collect every
    ``thaw_every`` seconds. Runs until cancelled; leaves the heap unfrozen then."""
    loop = asyncio.get_running_loop()
    thawed_at = loop.time()
    try:
        gc.freeze()
        while True:
            await asyncio.sleep(every)
            if loop.time() - thawed_at >= thaw_every:
                gc.unfreeze()
                found = gc.collect()
                thawed_at = loop.time()
                log.debug("heap thawed: %d unreachable objects collected", found)
            gc.freeze()
    finally:
        gc.unfreeze()
