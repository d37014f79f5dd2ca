"""The write fence: a replica that cannot prove it still holds the leader Lease sends no write.

Leader election alone does not keep two leaders apart when one event loop carries every
tenant's work: a reconcile that holds the loop for 15 s wakes up after another replica may
have taken over, and its next create or patch would go out beside the new leader's. So
every write the manager's client sends is checked, synchronously and right before it
leaves the process, against a deadline that only a successful Lease write moves:
``renew_deadline`` after that write began. Other candidates wait ``lease_duration``
(longer) from when they saw it, so the deadline always passes first. A write's timeout is
cut to the time left, so one sent just in time cannot land late either.

The deadline is read from :func:`time.monotonic`, the clock the Lease keeper's loop uses.
"""

from __future__ import annotations

import math
import time

from gharc.kube import metrics

__all__ = ["NotLeading", "WriteFence"]


class NotLeading(ConnectionError):
    """A write was not sent: this replica cannot prove it holds the leader Lease.

    A ``ConnectionError`` because, to the caller, it is a request that could not be sent:
    nothing reached the API server, and the level-triggered reconcile will try again on
    whichever replica leads."""


class WriteFence:
    """Open for ever until :meth:`arm`; then open only up to the deadline renewals set."""

    def __init__(self) -> None:
        self._until = math.inf
        self.refused = 0
        """Writes refused so far (also ``gharc_leader_fenced_writes_total``)."""

    @property
    def armed(self) -> bool:
        return self._until != math.inf

    def arm(self) -> None:
        """Refuse writes until a Lease write proves leadership (leader election is on)."""
        self._until = -math.inf

    def extend_to(self, until: float) -> None:
        """A Lease write that began at ``until - renew_deadline`` succeeded."""
        self._until = max(self._until, until)

    def close(self) -> None:
        """Leadership ended (lost, or released): no write goes out from now on."""
        if self.armed:
            self._until = -math.inf

    def remaining(self) -> float:
        """Seconds a write may still take (``inf`` when not armed)."""
        return self._until - time.monotonic()

    def check(self, method: str, path: str) -> float:
        """Seconds left for a write of ``method`` to ``path``; raises :class:`NotLeading`."""
        left = self.remaining()
        if left > 0:
            return left
        self.refused += 1
        metrics.FENCED_WRITES.inc()
        raise NotLeading(f"{method} {path} not sent: this replica no longer holds the leader Lease")
