"""At most N requests in flight per namespace, so one tenant's burst cannot fill the API
server's queue in front of another tenant's requests.

The client's rate limiter takes turns only where requests wait for tokens; a burst that
stays under the QPS still sends everything at once (about 80 requests in flight for a
400-runner burst). The API server then serves them as one client, with no notion of
tenant, and a quiet namespace's request (or the pod watch events it waits for) queues
behind all of them: measured, a trickle's pod create took 4.5 s and its pod event came
20 s late. Capping what each namespace has in flight turns that wait into a fixed number
of requests ahead, and costs nothing while the server answers fast. Watches are long-lived
and not counted; cluster-scoped requests (no namespace) are not capped.

The cap is N while a namespace is alone. While another namespace sent a request within the
last ``window`` seconds it is a quarter of N (at least 1), and an eighth (at least 1) for a
namespace whose own requests queue for a slot: a burst. A lone burst keeps its speed, a
runner's pod create and status write still go together in each of a thousand busy
namespaces, and a burst beside others goes one request at a time. Measured with a
400-runner burst beside a trickle of one job a second (2-core machine): at 8 in flight the
trickle's pickup p99 was 5.1 s, at 2 it was 0.5 s, at 1 (with the work queue's kept
workers) 0.14-0.26 s against 0.08-0.15 s quiet, and the burst's own pickup p50 moved from
7.7-9 s to 9-11 s (the API server is the bottleneck either way). A cap of 1 for every
namespace instead cost the 1,000-set bench's pickup p99 0.6 -> 1.2 s. Where the server is
fast and far, a sharing burst sends at the pace of one round trip: at 20 ms, 50 requests a
second, still above ARC's default client QPS (20). Namespaces of the controller itself
(its Leases, its listeners) are ``exempt``: they neither count as another tenant nor are
capped.

One request at a time still kept the API server busy with the burst all the time: on two
cores the trickle's pickup p95 was 2.3x its quiet value over 120 pickups (the figures
above are the largest of 30, which one hiccup decides). So a namespace with a whole cap's
worth of requests queued (a burst) beside another tenant also *rests* after each request,
for ``rest`` times as long as that request took (at most 1 s), before its slot is free
again: at 1 it has the server at most half of the time, and the rest is long exactly when
the server is slow (saturated) and negligible when it answers in a millisecond. Measured
(120 pickups a phase): p95 ratio 2.34 -> 1.58-1.60, p99 1.98-2.88 -> 1.42-1.54; the
burst's own pickup p50 13 -> 20 s, p99 31 -> 37 s. A lone burst never rests, nor does a
shallow queue (a scale set's start-up): resting on any queue cost the 1,000-set bench 15 s
of sessions.

Within a namespace, a request marked ``low`` (a status write: counts for people and the
parent object) waits until no other request of that namespace waits. Beside a thousand
busy namespaces every one is capped at 2 and then at 1, and a runner's creation sets off
status writes of its EphemeralRunner, EphemeralRunnerSet and AutoscalingRunnerSet in the
same namespace: queued first, they held the JIT Secret and the pod (what the job waits for)
behind them.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

SHARED_WINDOW = 5.0
"""Seconds a namespace counts as active after its last request began or ended."""


def shared_limit(limit: int) -> int:
    """The cap of a namespace while others are active: a quarter of ``limit``, at least 1."""
    return max(1, limit // 4)


BACKLOG_REST = 1.0
"""How long a backlogged namespace beside another tenant rests after a request, as a share
of the time the request took."""

MAX_REST = 1.0
"""Seconds a rest lasts at most: one request that hung until its timeout must not stop its
namespace for as long again."""


def backlogged_limit(limit: int) -> int:
    """The cap of a namespace with requests queued for a slot while others are active: an
    eighth of ``limit``, at least 1."""
    return max(1, limit // 8)


class NamespaceInFlight:
    """Slots per namespace, made when first needed and dropped when idle.

    Hand-written: asyncio's semaphores have a fixed size, and this one's depends on who
    else is busy."""

    def __init__(
        self,
        limit: int,
        *,
        window: float = SHARED_WINDOW,
        exempt: Iterable[str] = (),
        clock: Callable[[], float] | None = None,
        rest: float = BACKLOG_REST,
    ) -> None:
        if limit < 1:
            raise ValueError("the in-flight limit per namespace must be at least 1")
        self.limit = limit
        self.shared = shared_limit(limit)
        self.backlogged = backlogged_limit(limit)
        self.window = window
        self.exempt = set(exempt)
        self.rest = rest
        self._clock = clock
        self._running: dict[str, int] = {}
        self._resting: dict[str, int] = {}
        """Slots held by a backlogged namespace's rest after a request (not sent, not free)."""
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self._low: set[asyncio.Future[None]] = set()
        """Waiters that go after every other waiter of their namespace."""
        self._users: dict[str, int] = {}
        self._active: dict[str, float] = {}
        """Namespaces seen lately, and when."""

    def in_use(self, namespace: str) -> int:
        """Requests of ``namespace`` holding or waiting for a slot now."""
        return self._users.get(namespace, 0)

    def limit_for(self, namespace: str) -> int:
        """``namespace``'s cap now: the shared one while another namespace is active, and
        the backlogged one if, besides, requests of its own wait for a slot (a burst)."""
        if not self._others_active(namespace):
            return self.limit
        return self.backlogged if self._waiting.get(namespace) else self.shared

    @asynccontextmanager
    async def slot(self, namespace: str, *, low: bool = False) -> AsyncIterator[None]:
        """Hold one of ``namespace``'s slots for the block; ``low``: let the namespace's
        other waiting requests go first."""
        if not namespace or namespace in self.exempt:
            yield
            return
        self._users[namespace] = self._users.get(namespace, 0) + 1
        self._touch(namespace)
        try:
            await self._acquire(namespace, low)
            began = self._now()
            try:
                yield
            finally:
                self._release(namespace, self._now() - began)
        finally:
            self._touch(namespace)
            left = self._users[namespace] - 1
            if left:
                self._users[namespace] = left
            else:  # idle: forget its slots, so the tables hold only the namespaces busy now
                del self._users[namespace]
                self._running.pop(namespace, None)
                self._waiting.pop(namespace, None)

    def _taken(self, namespace: str) -> int:
        return self._running.get(namespace, 0) + self._resting.get(namespace, 0)

    async def _acquire(self, namespace: str, low: bool = False) -> None:
        while self._taken(namespace) >= self.limit_for(namespace):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            queue = self._waiting.setdefault(namespace, collections.deque())
            queue.append(waiter)
            if low:
                self._low.add(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in queue:
                    queue.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake(namespace)  # pass on the turn it was given
                raise
            finally:
                self._low.discard(waiter)
        self._running[namespace] = self._running.get(namespace, 0) + 1

    def _release(self, namespace: str, took: float) -> None:
        self._running[namespace] -= 1
        pause = min(took * self.rest, MAX_REST)
        if pause > 0 and self._deep_backlog(namespace) and self._others_active(namespace):
            self._resting[namespace] = self._resting.get(namespace, 0) + 1
            asyncio.get_running_loop().call_later(pause, self._rested, namespace)
            return
        self._wake(namespace)

    def _rested(self, namespace: str) -> None:
        left = self._resting.get(namespace, 0) - 1
        if left > 0:
            self._resting[namespace] = left
        else:
            self._resting.pop(namespace, None)
        self._wake(namespace)

    def _deep_backlog(self, namespace: str) -> bool:
        """A whole cap's worth of requests queued: a burst, not a runner's pair of requests
        or a scale set's start-up (resting there cost the 1,000-set bench 15 s of sessions)."""
        return len(self._waiting.get(namespace) or ()) >= self.limit

    def _others_active(self, namespace: str) -> bool:
        """Whether another namespace has a request now or had one within ``window``."""
        now = self._now()
        stale = [ns for ns, at in self._active.items() if now - at > self.window]
        for ns in stale:
            if not self._users.get(ns):
                del self._active[ns]
        return any(ns != namespace for ns in self._active)

    def _wake(self, namespace: str) -> None:
        queue = self._waiting.get(namespace)
        room = self.limit_for(namespace) - self._taken(namespace)
        while queue and room > 0:
            # The first waiter that is not low, else the first low one.
            waiter = next((w for w in queue if w not in self._low), queue[0])
            queue.remove(waiter)
            if not waiter.done():
                waiter.set_result(None)
                room -= 1

    def _touch(self, namespace: str) -> None:
        self._active[namespace] = self._now()

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()
