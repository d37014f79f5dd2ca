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
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class NamespaceInFlight:
    """A semaphore per namespace, made when first needed and dropped when idle."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the in-flight limit per namespace must be at least 1")
        self.limit = limit
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}

    def in_use(self, namespace: str) -> int:
        """Requests of ``namespace`` holding or waiting for a slot now."""
        return self._users.get(namespace, 0)

    @asynccontextmanager
    async def slot(self, namespace: str) -> AsyncIterator[None]:
        if not namespace:
            yield
            return
        slots = self._slots.get(namespace)
        if slots is None:
            slots = self._slots[namespace] = asyncio.Semaphore(self.limit)
        self._users[namespace] = self._users.get(namespace, 0) + 1
        try:
            async with slots:
                yield
        finally:
            left = self._users[namespace] - 1
            if left:
                self._users[namespace] = left
            else:  # idle: forget it, so the table holds only the namespaces busy now
                del self._users[namespace]
                del self._slots[namespace]
