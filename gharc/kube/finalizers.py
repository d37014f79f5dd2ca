"""Finalizer helpers that never clobber somebody else's finalizer.

``metadata.finalizers`` is a list, and a JSON merge patch replaces lists whole. Two
controllers each adding their own finalizer from stale reads would drop each other's, so
every write here carries the resourceVersion it was computed from: a concurrent change
makes it fail with Conflict (and the reconcile retries from a fresh read) instead of
silently winning. Without a change to make, no request is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gharc.kube.client import KubeClient
from gharc.kube.resources import Resource

__all__ = ["add_finalizer", "has_finalizer", "remove_finalizer"]

JSON = dict[str, Any]


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


async def add_finalizer(
    client: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> Mapping[str, Any]:
    """Append ``finalizer`` (optimistically locked); returns the updated object, or ``obj``
    unchanged when it was already there. Raises Conflict if ``obj`` is stale."""
    current = list((obj.get("metadata") or {}).get("finalizers") or ())
    if finalizer in current:
        return obj
    return await client.merge_patch(
        resource, obj, {"metadata": {"finalizers": [*current, finalizer]}}, optimistic_lock=True
    )


async def remove_finalizer(
    client: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> Mapping[str, Any]:
    """Remove ``finalizer`` (optimistically locked); returns the updated object (which may be
    gone already if it was the last finalizer of a deleted object), or ``obj`` unchanged."""
    current = list((obj.get("metadata") or {}).get("finalizers") or ())
    if finalizer not in current:
        return obj
    remaining = [f for f in current if f != finalizer]
    return await client.merge_patch(
        resource, obj, {"metadata": {"finalizers": remaining or None}}, optimistic_lock=True
    )
