"""The write fence per shard: a write about a scale set of shard k is sent only while this
replica can prove it holds shard k's Lease.

With ``--shards N`` (N > 1) replicas split the scale sets between them (:mod:`gharc.kube.shards`),
and the single leader fence (:mod:`gharc.kube.fence`) no longer says who may write: every
replica writes, each about its own scale sets. So each shard has a :class:`WriteFence` of its
own, extended by that shard's Lease renewals, and a write is checked against the fence of the
shard it is about. Which shard that is, the client cannot tell from a path (a runner Pod's name
does not name its scale set); the code acting on a scale set says it instead, by running inside
:func:`acting_for` (a reconcile of one of its objects, the task of its in-process listener).
Tasks started inside inherit the shard (``contextvars`` are copied at task creation), so a
listener's patches are fenced by the shard its listener was started for.

A write made outside any shard (events, cluster-wide sweeps) passes this fence unchecked.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from gharc.kube.fence import NotLeading, WriteFence

__all__ = ["CURRENT_SHARD", "NotOwner", "ShardFences", "acting_for", "current_shard"]

CURRENT_SHARD: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "gharc_current_shard", default=None
)
"""The shard the running code acts for; None outside any."""


class NotOwner(NotLeading):
    """A write was not sent: this replica cannot prove it holds the Lease of the shard the
    write is about. A :class:`NotLeading` (so a ``ConnectionError``), handled alike."""


def current_shard() -> int | None:
    return CURRENT_SHARD.get()


@contextlib.contextmanager
def acting_for(shard: int | None) -> Iterator[None]:
    """Run the block (and the tasks it starts) as acting for ``shard``."""
    token = CURRENT_SHARD.set(shard)
    try:
        yield
    finally:
        CURRENT_SHARD.reset(token)


class ShardFences:
    """One armed :class:`WriteFence` per shard, all closed until their Lease is written."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("need at least one shard")
        self.count = count
        self.fences = [WriteFence() for _ in range(count)]
        for fence in self.fences:
            fence.arm()

    def __getitem__(self, shard: int) -> WriteFence:
        return self.fences[shard]

    def open(self, shard: int) -> bool:
        return self.fences[shard].remaining() > 0

    def check(self, method: str, path: str) -> float:
        """Seconds left for a write made in the current context (``inf`` outside a shard);
        raises :class:`NotOwner` when its shard's fence is closed."""
        shard = CURRENT_SHARD.get()
        if shard is None:
            return float("inf")
        fence = self.fences[shard]
        left = fence.remaining()
        if left > 0:
            return left
        try:
            fence.check(method, path)  # counts the refusal
        except NotLeading:
            pass
        raise NotOwner(f"{method} {path} not sent: this replica no longer holds shard {shard}")
