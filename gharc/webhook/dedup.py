"""The recent deliveries, by ``X-GitHub-Delivery``, so a redelivery is answered, not applied.

GitHub keeps the delivery ID when a delivery is redelivered (by hand, by the API, or by a
proxy that retries), so the same ID is the same event: it must not reserve a second
runner or release a second one. This window answers a repeated ID with the first answer
while that answer is remembered (``ttl`` seconds, at most ``capacity`` IDs, oldest
forgotten first). A redelivery that arrives while the first is still being handled waits
for the first's answer instead of running in parallel.

Only final answers are remembered: a 5xx (the reservation was not stored) is forgotten so
that the redelivery GitHub is asked for gets a real second try. What survives a restart is
not this window but the reservation itself, which is named after its workflow job
(:mod:`gharc.webhook.batch`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

CAPACITY = 10_000
TTL = 3600.0


@dataclass(frozen=True)
class Answer:
    status: int
    text: str


@dataclass
class _Entry:
    answer: asyncio.Future[Answer]
    at: float


class DeliveryWindow:
    """Bounded memory of delivery IDs and their answers."""

    def __init__(
        self,
        *,
        capacity: int = CAPACITY,
        ttl: float = TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self, now: float) -> None:
        while self._entries:
            delivery, entry = next(iter(self._entries.items()))
            if now - entry.at < self.ttl and len(self._entries) <= self.capacity:
                return
            del self._entries[delivery]

    def claim(self, delivery: str) -> tuple[bool, asyncio.Future[Answer]]:
        """``(True, answer)``: the caller handles this delivery and must :meth:`settle`
        ``answer``. ``(False, answer)``: the delivery was seen before; await its answer."""
        now = self.clock()
        self._expire(now)
        entry = self._entries.get(delivery)
        if entry is not None:
            return False, entry.answer
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._entries[delivery] = _Entry(fut, now)
        self._expire(now)
        return True, fut

    def settle(self, delivery: str, answer: asyncio.Future[Answer], result: Answer) -> None:
        """Give the waiters ``result``; a 5xx is forgotten (the redelivery retries)."""
        if not answer.done():
            answer.set_result(result)
        entry = self._entries.get(delivery)
        if result.status >= 500 and entry is not None and entry.answer is answer:
            del self._entries[delivery]
