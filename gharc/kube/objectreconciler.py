"""Reconcile an object instead of a key (controller-runtime's ``reconcile.AsReconciler``).

Nearly every reconciler opens the same way: read the object its request names, and do
nothing when it is gone; whatever had to happen at its deletion happened while it still
existed, under its finalizer. :func:`reconcile_fetched` is that opening, written once: it
reads, returns on NotFound, and hands the object to ``reconcile_object``. Deletion, status
and requeues stay with the reconciler, because they are where reconcilers differ.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import Resource
from gharc.kube.store import copy_object

__all__ = ["Get", "ReconcileObject", "reconcile_fetched", "request_of"]

JSON = dict[str, Any]
ReconcileObject = Callable[[JSON], Awaitable[Result | None]]


class Get(Protocol):
    """How the adapter reads: ``cache.get``, ``client.get``, or a reconciler's own read
    (raising :class:`~gharc.kube.errors.NotFound` when the object is gone)."""

    def __call__(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> Awaitable[JSON]: ...


def request_of(obj: Mapping[str, Any]) -> Request:
    """The request that names ``obj``, for a ``reconcile_object`` that logs or keys by it
    (``""`` namespace for cluster-scoped kinds, as the controller queues them)."""
    md = objects.meta(obj)
    return Request(str(md.get("namespace") or ""), str(md.get("name") or ""))


async def reconcile_fetched(
    get: Get,
    resource: Resource,
    request: Request,
    reconcile_object: ReconcileObject,
    *,
    copy: bool = False,
    on_gone: Callable[[Request], None] | None = None,
) -> Result | None:
    """Read ``resource`` by the request's namespace and name with ``get`` (``cache.get``
    mostly) and pass it to ``reconcile_object``; an object that is gone ends the reconcile
    (``None``) after ``on_gone``, if given, has dropped what was kept about it.

    ``get`` is taken per call, not bound once, so a reconciler whose reader is replaced
    (a test's lagging cache) reads from the new one.
    ``copy``: hand over a private copy, for a ``reconcile_object`` that edits the object it
    was given (cache objects are shared and must not be mutated).
    """
    try:
        obj = await get(resource, request.name, namespace=request.namespace)
    except kerrors.NotFound:
        if on_gone is not None:
            on_gone(request)
        return None
    return await reconcile_object(copy_object(obj) if copy else obj)
