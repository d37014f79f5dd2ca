"""``--shards N``: which replica acts for which scale set, and what it does when that changes.

A scale set ``namespace/name`` belongs to shard :func:`~gharc.kube.shards.shard_of`; the
replica holding that shard's Lease (:class:`~gharc.kube.shards.ShardKeeper`) reconciles the
set's AutoscalingRunnerSet, EphemeralRunnerSets, EphemeralRunners and AutoscalingListener and
hosts its listener. Every replica runs every controller and caches every object; a
:class:`ScaleSetRouter` per controller maps a key to its scale set (the set itself; the
``actions.github.com/scale-set-*`` labels of a runner set or runner, else its owner chain; the
``spec.autoscalingRunnerSet*`` of a listener) and lets through only keys of held shards, run
as acting for their shard so their writes pass that shard's fence.

The cluster-wide work no scale set owns (the node loss controller) belongs to shard 0.
The registration sweep (:mod:`orphans`) runs on every replica over the sets of its shards.

When this replica gains a shard, the objects of that shard are queued again in every
controller (their events were dropped while another replica held it); the listener
reconcile then starts each listener, which resumes the session recorded on its
EphemeralRunnerSet. When it gives a shard away, its listeners stop first, keeping their
sessions for the next holder.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gharc.api.resources import AUTOSCALING_LISTENERS, EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import AutoscalingListenerView
from gharc.kube import objects
from gharc.kube.cache import Cache
from gharc.kube.controller import Controller
from gharc.kube.informer import Informer
from gharc.kube.reconcile import Request
from gharc.kube.shards import shard_of

__all__ = ["ScaleSetRouter", "Sharding", "scale_set_of_labels"]

log = logging.getLogger(__name__)

Key = tuple[str, str]
Resolve = Callable[[Request], Key | None]


def scale_set_of_labels(obj: Mapping[str, Any]) -> Key | None:
    """The scale set an object names in its ``actions.github.com/scale-set-*`` labels."""
    labels = objects.meta(obj).get("labels") or {}
    ns, name = labels.get(c.LABEL_SCALE_SET_NAMESPACE), labels.get(c.LABEL_SCALE_SET_NAME)
    return (str(ns), str(name)) if ns and name else None


def _owner(obj: Mapping[str, Any], kind: str) -> str:
    for ref in objects.meta(obj).get("ownerReferences") or ():
        if ref.get("kind") == kind and ref.get("controller"):
            return str(ref.get("name") or "")
    return ""


class _Resolvers:
    """Key -> scale set, read from the shared cache's stores (synchronous: no await)."""

    def __init__(self, cache: Cache) -> None:
        self.runner_sets: Informer = cache.informer(EPHEMERAL_RUNNER_SETS)
        self.runners: Informer = cache.informer(EPHEMERAL_RUNNERS)
        self.listeners: Informer = cache.informer(AUTOSCALING_LISTENERS)

    @staticmethod
    def runner_set_scale_set(request: Request) -> Key | None:
        return (request.namespace, request.name)

    def of_runner_set(self, request: Request) -> Key | None:
        obj = self.runner_sets.store.get(request.namespace, request.name)
        if obj is None:
            return None
        owner = _owner(obj, "AutoscalingRunnerSet")
        return scale_set_of_labels(obj) or ((request.namespace, owner) if owner else None)

    def of_runner(self, request: Request) -> Key | None:
        obj = self.runners.store.get(request.namespace, request.name)
        if obj is None:
            return None
        found = scale_set_of_labels(obj)
        if found is not None:
            return found
        owner = _owner(obj, "EphemeralRunnerSet")
        return self.of_runner_set(Request(request.namespace, owner)) if owner else None

    def of_listener(self, request: Request) -> Key | None:
        obj = self.listeners.store.get(request.namespace, request.name)
        if obj is None:
            return None
        view = AutoscalingListenerView(obj)
        ns, name = view.ars_namespace, view.ars_name
        return (ns, name) if ns and name else None


@dataclass
class ScaleSetRouter:
    """A controller's :class:`~gharc.kube.controller.Router`: keys of held shards only."""

    owns: Callable[[int], bool]
    count: int
    resolve: Resolve

    def shard(self, request: Request) -> int | None:
        key = self.resolve(request)
        return None if key is None else shard_of(key[0], key[1], self.count)

    def route(self, request: Request) -> int | None:
        shard = self.shard(request)
        return shard if shard is not None and self.owns(shard) else None


def _in_shard(router: ScaleSetRouter, shard: int) -> Callable[[Request], bool]:
    return lambda request: router.shard(request) == shard


@dataclass
class Sharding:
    """Wires ``count`` shards into the scale set controllers of one replica.

    ``owns`` says whether this replica holds a shard (the keeper's view); ``host`` is the
    in-process listener host, if any."""

    owns: Callable[[int], bool]
    count: int
    host: Any = None
    routers: dict[str, tuple[Controller, ScaleSetRouter]] = field(default_factory=dict)

    def install(self, cache: Cache, controllers: Mapping[str, Controller]) -> None:
        """Give each controller (by name) its router; unknown names act for shard 0."""
        resolvers = _Resolvers(cache)
        by_name: dict[str, Resolve] = {
            "autoscalingrunnerset": resolvers.runner_set_scale_set,
            "ephemeralrunnerset": resolvers.of_runner_set,
            "ephemeralrunner": resolvers.of_runner,
            "autoscalinglistener": resolvers.of_listener,
        }
        for name, controller in controllers.items():
            resolve = by_name.get(name)
            router = (
                ScaleSetRouter(self.owns, self.count, resolve)
                if resolve is not None
                else ScaleSetRouter(self.owns, 1, lambda _request: ("", ""))  # shard 0
            )
            controller.router = router
            self.routers[name] = (controller, router)

    def runner_set_shard(self, runner_set: Mapping[str, Any]) -> int | None:
        """The shard of an EphemeralRunnerSet's scale set when held here, else None."""
        m = objects.meta(runner_set)
        ns = str(m.get("namespace") or "")
        owner = _owner(runner_set, "AutoscalingRunnerSet")
        key = scale_set_of_labels(runner_set) or ((ns, owner) if owner else None)
        if key is None:
            return None
        shard = shard_of(key[0], key[1], self.count)
        return shard if self.owns(shard) else None

    def gained(self, shard: int) -> None:
        """Queue again every object of ``shard`` (on the main loop, from the keeper)."""
        total = 0
        for controller, router in self.routers.values():
            forget_markers = getattr(controller.reconciler, "forget_markers", None)
            if forget_markers is not None:
                forget_markers()  # another replica may have written some since
            total += controller.enqueue_existing(_in_shard(router, shard))
        log.info("shard %d gained: %d objects queued", shard, total)

    def lost(self, shard: int) -> None:
        """Stop the listeners of ``shard`` (its fence closed already: they write nothing)."""
        if self.host is not None:
            asyncio.get_running_loop().create_task(
                self.host.drop_shard(shard), name=f"shard-{shard}-lost"
            )

    async def before_release(self, shard: int) -> None:
        """Awaited before ``shard`` is given away: its listeners have stopped."""
        if self.host is not None:
            await self.host.drop_shard(shard)
