"""The fluent way to wire a controller (controller-runtime's pkg/builder).

Usage::

    Builder(manager) \\
        .named("ephemeralrunnerset") \\
        .for_(EPHEMERAL_RUNNER_SETS, GenerationChangedPredicate()) \\
        .owns(EPHEMERAL_RUNNERS) \\
        .watches(SECRETS, EnqueueRequestsFromMapFunc(secret_to_sets)) \\
        .with_options(max_concurrent_reconciles=4) \\
        .complete(EphemeralRunnerSetReconciler(...))

All informers come from the manager's shared cache, so ``owns(PODS)`` in two controllers
is one watch. ``owns`` enqueues the owner named by the ``controller: true`` ownerReference
of the ``for_`` kind, which is how children wake up their parent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gharc.kube.cache import Cache
from gharc.kube.controller import Controller
from gharc.kube.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    Handler,
)
from gharc.kube.predicate import Predicate
from gharc.kube.ratelimit import RateLimiter
from gharc.kube.reconcile import Reconciler, Request
from gharc.kube.resources import Resource

__all__ = ["Builder"]

JSON = dict[str, Any]


class _ManagerLike(Protocol):
    @property
    def cache(self) -> Cache: ...

    def add(self, runnable: Any) -> None: ...


@dataclass(slots=True)
class _Watch:
    resource: Resource
    handler: Handler
    predicates: tuple[Predicate, ...]
    label_selector: str | None = None


@dataclass(slots=True)
class _Options:
    max_concurrent_reconciles: int = 1
    rate_limiter: RateLimiter[Request] | None = None
    reconcile_timeout: float | None = None
    need_leader_election: bool = True
    cache_sync_timeout: float = 120.0
    extra: dict[str, Any] = field(default_factory=dict)


class Builder:
    """Collects ``for_``/``owns``/``watches`` and builds one Controller on ``complete``.

    ``target`` is a Manager (the controller is added to it) or a bare Cache (the caller
    runs ``controller.start()`` itself, as unit tests and the bench do).
    """

    def __init__(self, target: _ManagerLike | Cache) -> None:
        if isinstance(target, Cache):
            self._cache, self._manager = target, None
        else:
            self._cache, self._manager = target.cache, target
        self._name: str | None = None
        self._for: _Watch | None = None
        self._watches: list[_Watch] = []
        self._filters: list[Predicate] = []
        self._options = _Options()

    def named(self, name: str) -> Builder:
        """The controller's name: metrics label, queue name, log field. Must be unique."""
        self._name = name
        return self

    def for_(
        self, resource: Resource, *predicates: Predicate, label_selector: str | None = None
    ) -> Builder:
        """The kind this controller reconciles; its events enqueue the object itself."""
        if self._for is not None:
            raise ValueError("for_() may be called only once")
        self._for = _Watch(resource, EnqueueRequestForObject(), predicates, label_selector)
        return self

    def owns(
        self,
        resource: Resource,
        *predicates: Predicate,
        only_controller: bool = True,
        label_selector: str | None = None,
    ) -> Builder:
        """Children of kind ``resource``: their events enqueue their ``for_`` owner."""
        if self._for is None:
            raise ValueError("call for_() before owns()")
        handler = EnqueueRequestForOwner(self._for.resource, only_controller=only_controller)
        self._watches.append(_Watch(resource, handler, predicates, label_selector))
        return self

    def watches(
        self,
        resource: Resource,
        handler: Handler | Callable[[JSON], Iterable[Request]],
        *predicates: Predicate,
        label_selector: str | None = None,
    ) -> Builder:
        """Any other kind, mapped to requests by ``handler`` (a Handler or a map function)."""
        if not hasattr(handler, "requests"):
            handler = EnqueueRequestsFromMapFunc(handler)
        self._watches.append(_Watch(resource, handler, predicates, label_selector))
        return self

    def with_event_filter(self, *predicates: Predicate) -> Builder:
        """Predicates applied to every watch of this controller."""
        self._filters.extend(predicates)
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        reconcile_timeout: float | None = None,
        need_leader_election: bool | None = None,
        cache_sync_timeout: float | None = None,
    ) -> Builder:
        o = self._options
        if max_concurrent_reconciles is not None:
            o.max_concurrent_reconciles = max_concurrent_reconciles
        if rate_limiter is not None:
            o.rate_limiter = rate_limiter
        if reconcile_timeout is not None:
            o.reconcile_timeout = reconcile_timeout
        if need_leader_election is not None:
            o.need_leader_election = need_leader_election
        if cache_sync_timeout is not None:
            o.cache_sync_timeout = cache_sync_timeout
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """Build the controller, register its watches, and add it to the manager."""
        if self._for is None:
            raise ValueError("for_() is required")
        name = self._name or self._for.resource.kind.lower()
        o = self._options
        controller = Controller(
            name,
            reconciler,
            max_concurrent_reconciles=o.max_concurrent_reconciles,
            rate_limiter=o.rate_limiter,
            reconcile_timeout=o.reconcile_timeout,
            need_leader_election=o.need_leader_election,
            cache_sync_timeout=o.cache_sync_timeout,
        )
        for w in (self._for, *self._watches):
            informer = self._cache.informer(w.resource, label_selector=w.label_selector)
            controller.watch(informer, w.handler, *self._filters, *w.predicates)
        if self._manager is not None:
            self._manager.add(controller)
        return controller
