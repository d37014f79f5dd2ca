"""A hosted listener's GitHub calls stop with its shard's write fence.

With ``--shards`` > 1 a replica whose loop stalled past its shard Lease may wake up with a
listener mid-cycle: a message just read, a job about to be acquired. Its Kubernetes writes
are refused by the shard's fence (:mod:`gharc.kube.shardfence`); its GitHub calls must be
too, or it would acquire jobs and delete messages of a session the shard's new holder has
resumed, and the patch that should follow would never land. So each call first checks the
fence; a refused call raises :class:`~gharc.kube.shardfence.NotOwner` (a ``ConnectionError``,
so the listener backs off as for any transient failure, and the message it did not
acknowledge is redelivered to the new holder) until the replica stops the listener.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gharc.kube.shardfence import NotOwner, ShardFences
from gharc.listener.session import ActionsAPI

__all__ = ["FencedActions", "fenced"]

_UNFENCED = frozenset({"aclose"})
"""Calls that never act for the scale set (closing the client's connections)."""


class FencedActions:
    """``api``, whose every call is first checked against ``fences[shard]``."""

    def __init__(self, api: ActionsAPI, shard: int, fences: ShardFences) -> None:
        self._api = api
        self._shard = shard
        self._fences = fences

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if name in _UNFENCED or not callable(attr):
            return attr
        return self._checked(name, attr)

    def _checked(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def checked(*args: Any, **kwargs: Any) -> Any:
            if not self._fences.open(self._shard):
                raise NotOwner(
                    f"GitHub call {name} not sent: this replica no longer holds shard {self._shard}"
                )
            return await call(*args, **kwargs)

        return checked


def fenced(api: ActionsAPI, shard: int | None, fences: ShardFences | None) -> ActionsAPI:
    """``api`` fenced by its shard, or ``api`` itself when not sharded."""
    if shard is None or fences is None:
        return api
    return FencedActions(api, shard, fences)
