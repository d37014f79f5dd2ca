"""gharc.kube: the controller core (client, informers and cache, work queue, controllers,
manager, leader election, events, finalizers).

Only this file re-exports names; inside gharc import modules and use them qualified
(``from gharc.kube import client, errors`` then ``errors.NotFound``), as kopf does, so a
reader always sees where a name lives. Everything listed in ``__all__`` is public API;
the test ``tests/unit/kube/test_public_api.py`` keeps the list sorted and importable.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gharc.kube.builder import Builder
    from gharc.kube.cache import Cache, CacheNotStarted
    from gharc.kube.client import KubeClient, ObjectList, PatchType, Reader, object_key
    from gharc.kube.clock import Clock, FakeClock, LoopClock
    from gharc.kube.config import load_configuration, new_api_client
    from gharc.kube.controller import CacheSyncTimeout, Controller
    from gharc.kube.errors import (
        AlreadyExists,
        ApiError,
        Conflict,
        Forbidden,
        Gone,
        Invalid,
        NotFound,
        ServerTimeout,
        TooManyRequests,
    )
    from gharc.kube.events import NORMAL, WARNING, EventRecorder
    from gharc.kube.finalizers import add_finalizer, remove_finalizer
    from gharc.kube.handler import (
        EnqueueRequestForObject,
        EnqueueRequestForOwner,
        EnqueueRequestsFromMapFunc,
        Handler,
        owner_reference,
    )
    from gharc.kube.informer import EventHandler, EventHandlerFuncs, Informer
    from gharc.kube.labels import Selector
    from gharc.kube.leaderelection import LeaderElectionConfig, LeaderElector
    from gharc.kube.logging import log_context, setup_logging
    from gharc.kube.manager import LeaderElectionLost, Manager, Runnable
    from gharc.kube.objects import has_finalizer
    from gharc.kube.predicate import (
        ChangedBesides,
        GenerationChangedPredicate,
        LabelSelectorPredicate,
        Predicate,
        ResourceVersionChangedPredicate,
    )
    from gharc.kube.ratelimit import (
        BucketRateLimiter,
        ItemExponentialFailureRateLimiter,
        MaxOfRateLimiter,
        RateLimiter,
        default_controller_rate_limiter,
    )
    from gharc.kube.reconcile import Reconciler, ReconcilerFunc, Request, Result, TerminalError
    from gharc.kube.reflector import WatchSettings
    from gharc.kube.resources import Resource
    from gharc.kube.store import (
        BY_CONTROLLER_UID,
        BY_OWNER_UID,
        Store,
        copy_object,
        index_by_controller_uid,
        index_by_label,
        index_by_owner_uid,
    )
    from gharc.kube.workqueue import ShutDown, WorkQueue

# Names resolve on first use (PEP 562), so a process importing one submodule, such as the
# pod listener importing gharc.kube.objects, does not load the manager, informers and aiohttp.
_WHERE: dict[str, str] = {
    "AlreadyExists": "gharc.kube.errors",
    "ApiError": "gharc.kube.errors",
    "BY_CONTROLLER_UID": "gharc.kube.store",
    "BY_OWNER_UID": "gharc.kube.store",
    "BucketRateLimiter": "gharc.kube.ratelimit",
    "Builder": "gharc.kube.builder",
    "Cache": "gharc.kube.cache",
    "CacheNotStarted": "gharc.kube.cache",
    "CacheSyncTimeout": "gharc.kube.controller",
    "ChangedBesides": "gharc.kube.predicate",
    "Clock": "gharc.kube.clock",
    "Conflict": "gharc.kube.errors",
    "Controller": "gharc.kube.controller",
    "EnqueueRequestForObject": "gharc.kube.handler",
    "EnqueueRequestForOwner": "gharc.kube.handler",
    "EnqueueRequestsFromMapFunc": "gharc.kube.handler",
    "EventHandler": "gharc.kube.informer",
    "EventHandlerFuncs": "gharc.kube.informer",
    "EventRecorder": "gharc.kube.events",
    "FakeClock": "gharc.kube.clock",
    "Forbidden": "gharc.kube.errors",
    "GenerationChangedPredicate": "gharc.kube.predicate",
    "Gone": "gharc.kube.errors",
    "Handler": "gharc.kube.handler",
    "Informer": "gharc.kube.informer",
    "Invalid": "gharc.kube.errors",
    "ItemExponentialFailureRateLimiter": "gharc.kube.ratelimit",
    "KubeClient": "gharc.kube.client",
    "LabelSelectorPredicate": "gharc.kube.predicate",
    "LeaderElectionConfig": "gharc.kube.leaderelection",
    "LeaderElectionLost": "gharc.kube.manager",
    "LeaderElector": "gharc.kube.leaderelection",
    "LoopClock": "gharc.kube.clock",
    "Manager": "gharc.kube.manager",
    "MaxOfRateLimiter": "gharc.kube.ratelimit",
    "NORMAL": "gharc.kube.events",
    "NotFound": "gharc.kube.errors",
    "ObjectList": "gharc.kube.client",
    "PatchType": "gharc.kube.client",
    "Predicate": "gharc.kube.predicate",
    "RateLimiter": "gharc.kube.ratelimit",
    "Reader": "gharc.kube.client",
    "Reconciler": "gharc.kube.reconcile",
    "ReconcilerFunc": "gharc.kube.reconcile",
    "Request": "gharc.kube.reconcile",
    "Resource": "gharc.kube.resources",
    "ResourceVersionChangedPredicate": "gharc.kube.predicate",
    "Result": "gharc.kube.reconcile",
    "Runnable": "gharc.kube.manager",
    "Selector": "gharc.kube.labels",
    "ServerTimeout": "gharc.kube.errors",
    "ShutDown": "gharc.kube.workqueue",
    "Store": "gharc.kube.store",
    "TerminalError": "gharc.kube.reconcile",
    "TooManyRequests": "gharc.kube.errors",
    "WARNING": "gharc.kube.events",
    "WatchSettings": "gharc.kube.reflector",
    "WorkQueue": "gharc.kube.workqueue",
    "add_finalizer": "gharc.kube.finalizers",
    "copy_object": "gharc.kube.store",
    "default_controller_rate_limiter": "gharc.kube.ratelimit",
    "has_finalizer": "gharc.kube.objects",
    "index_by_controller_uid": "gharc.kube.store",
    "index_by_label": "gharc.kube.store",
    "index_by_owner_uid": "gharc.kube.store",
    "load_configuration": "gharc.kube.config",
    "log_context": "gharc.kube.logging",
    "new_api_client": "gharc.kube.config",
    "object_key": "gharc.kube.client",
    "owner_reference": "gharc.kube.handler",
    "remove_finalizer": "gharc.kube.finalizers",
    "setup_logging": "gharc.kube.logging",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'gharc.kube' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BY_CONTROLLER_UID",
    "BY_OWNER_UID",
    "NORMAL",
    "WARNING",
    "AlreadyExists",
    "ApiError",
    "BucketRateLimiter",
    "Builder",
    "Cache",
    "CacheNotStarted",
    "CacheSyncTimeout",
    "ChangedBesides",
    "Clock",
    "Conflict",
    "Controller",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "EventHandlerFuncs",
    "EventRecorder",
    "FakeClock",
    "Forbidden",
    "GenerationChangedPredicate",
    "Gone",
    "Handler",
    "Informer",
    "Invalid",
    "ItemExponentialFailureRateLimiter",
    "KubeClient",
    "LabelSelectorPredicate",
    "LeaderElectionConfig",
    "LeaderElectionLost",
    "LeaderElector",
    "LoopClock",
    "Manager",
    "MaxOfRateLimiter",
    "NotFound",
    "ObjectList",
    "PatchType",
    "Predicate",
    "RateLimiter",
    "Reader",
    "Reconciler",
    "ReconcilerFunc",
    "Request",
    "Resource",
    "ResourceVersionChangedPredicate",
    "Result",
    "Runnable",
    "Selector",
    "ServerTimeout",
    "ShutDown",
    "Store",
    "TerminalError",
    "TooManyRequests",
    "WatchSettings",
    "WorkQueue",
    "add_finalizer",
    "copy_object",
    "default_controller_rate_limiter",
    "has_finalizer",
    "index_by_controller_uid",
    "index_by_label",
    "index_by_owner_uid",
    "load_configuration",
    "log_context",
    "new_api_client",
    "object_key",
    "owner_reference",
    "remove_finalizer",
    "setup_logging",
]
