"""gharc.kube: the controller core (client, informers and cache, work queue, controllers,
manager, leader election, events, finalizers).

Only this file re-exports names; inside gharc import modules and use them qualified
(``from gharc.kube import client, errors`` then ``errors.NotFound``), as kopf does, so a
reader always sees where a name lives. Everything listed in ``__all__`` is public API;
the test ``tests/unit/kube/test_public_api.py`` keeps the list sorted and importable.
"""

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
from gharc.kube.finalizers import add_finalizer, has_finalizer, remove_finalizer
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
from gharc.kube.predicate import (
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
