"""Event handlers: which keys to enqueue when a watched object changes (pkg/handler).

A handler maps one object to the requests it should trigger. For updates the controller
enqueues the requests of both the old and the new object, so moving a child from one
owner to another wakes up both owners.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from gharc.kube import objects
from gharc.kube.reconcile import Request
from gharc.kube.resources import Resource

__all__ = [
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "Handler",
    "MapFunc",
    "owner_reference",
]

JSON = dict[str, Any]
MapFunc = Callable[[JSON], Iterable[Request]]


class Handler(Protocol):
    def requests(self, obj: JSON) -> Iterable[Request]: ...


class EnqueueRequestForObject:
    """Enqueue the object itself (the ``for_`` kind of a controller)."""

    def requests(self, obj: JSON) -> Iterable[Request]:
        meta = objects.meta(obj)
        return (Request(meta.get("namespace") or "", meta["name"]),)


class EnqueueRequestForOwner:
    """Enqueue the owner of kind ``owner`` named in the object's ownerReferences.

    Matches on API group and kind (not version, as controller-runtime does, so an owner
    reference written by an older version still maps). With ``only_controller`` only the
    reference with ``controller: true`` counts, which is what ``Builder.owns`` uses.
    Owners are in the object's namespace (namespaced owners) or cluster-scoped.
    """

    def __init__(self, owner: Resource, *, only_controller: bool = True) -> None:
        self.owner = owner
        self.only_controller = only_controller

    def requests(self, obj: JSON) -> Iterable[Request]:
        meta = objects.meta(obj)
        namespace = (meta.get("namespace") or "") if self.owner.namespaced else ""
        out = []
        for ref in meta.get("ownerReferences") or ():
            if self.only_controller and not ref.get("controller"):
                continue
            if (
                ref.get("kind") != self.owner.kind
                or _group(ref.get("apiVersion", "")) != self.owner.group
            ):
                continue
            out.append(Request(namespace, ref["name"]))
        return out


class EnqueueRequestsFromMapFunc:
    """Enqueue whatever ``fn`` returns for the object (e.g. a secret -> its users)."""

    def __init__(self, fn: MapFunc) -> None:
        self.fn = fn

    def requests(self, obj: JSON) -> Iterable[Request]:
        return self.fn(obj)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def owner_reference(
    owner: Mapping[str, Any], *, controller: bool = True, block_owner_deletion: bool = True
) -> JSON:
    """An ownerReference to ``owner`` (a dict with apiVersion, kind, metadata.name/uid)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
    }
