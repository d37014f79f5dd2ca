"""The reconciler contract (controller-runtime's pkg/reconcile).

Reconciliation is *level-based*: a :class:`Request` names an object and nothing else, not
the event that woke us, nor the object's content. The reconciler reads the current state
(from the cache, or the API for values it must not see stale), compares it with the
desired state and acts. Because it never depends on which event happened, missed,
merged or repeated events cannot make it wrong; the work queue is then free to merge ten
events for one key into one reconcile.

Outcomes:

- return ``Result()`` (or ``None``): done; the key's failure backoff is reset.
- return ``Result(requeue_after=s)``: look again in ``s`` seconds (polling something the
  cluster does not send events for, or a backoff the reconciler computes itself, e.g.
  behaviour B1). The failure backoff is reset.
- raise: retry with per-key exponential backoff (5 ms doubling to 1000 s) and the
  controller's overall rate limit.
- raise :class:`TerminalError`: logged and counted, not retried until the next event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Reconciler", "ReconcilerFunc", "Request", "Result", "TerminalError"]


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """The key of one object; ``namespace`` is ``""`` for cluster-scoped kinds."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None
    """Seconds until the same key is reconciled again (None or 0: not scheduled)."""
    requeue: bool = False
    """Requeue with the rate limiter's backoff, without counting as an error.
    Prefer ``requeue_after`` (controller-runtime deprecated ``Requeue`` for the same reason:
    a backoff that grows without an error is hard to reason about)."""


class TerminalError(Exception):
    """An error that retrying cannot fix (invalid spec): report it and wait for a change."""


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None:
        """Make the world match the object named by ``request``; see the module docstring."""
        ...


class ReconcilerFunc:
    """Adapts ``async def fn(request) -> Result | None`` to the Reconciler protocol."""

    def __init__(self, fn: Callable[[Request], Awaitable[Result | None]]) -> None:
        self.fn = fn

    async def reconcile(self, request: Request) -> Result | None:
        return await self.fn(request)
