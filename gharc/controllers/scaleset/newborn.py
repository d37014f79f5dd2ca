"""Which EphemeralRunners this process created and has not tried to register yet.

The EphemeralRunnerSet reconciler creates runners; the EphemeralRunner reconciler registers
them. A runner known to be brand new skips the reads that look for a half-made registration
(one GitHub call less per runner), so the two reconcilers share one :class:`Newborn`,
handed to both by the scale set wiring (:class:`~gharc.controllers.scaleset.deps.ScaleSetDeps`).
"""

from __future__ import annotations

import time


class Newborn:
    """Uids of EphemeralRunners this process created and has not tried to register yet.

    The EphemeralRunnerSet reconciler adds each runner it creates; the first registration
    attempt takes it out (before calling GitHub, so a failed attempt falls back to the
    reads that find a half-made registration). The runner's add event can reach the
    EphemeralRunner reconciler before the create call returns to the set's reconciler:
    a uid asked about before it was added is remembered as taken, and its late ``add``
    is ignored (else a stale cache would see a second first attempt). Bounded: entries
    are forgotten after an hour.
    """

    def __init__(self) -> None:
        self._uids: dict[str, float] = {}
        self._taken: dict[str, float] = {}

    def _trim(self, now: float) -> None:
        for table in (self._uids, self._taken):
            if len(table) > 10_000:
                for k in [k for k, t in table.items() if now - t >= 3600]:
                    del table[k]

    def add(self, uid: str) -> None:
        now = time.monotonic()
        self._trim(now)
        if uid and uid not in self._taken:
            self._uids[uid] = now

    def take(self, uid: str) -> bool:
        """True once for a runner added before this first question about it."""
        if not uid:
            return False
        self._taken[uid] = time.monotonic()
        return self._uids.pop(uid, None) is not None
