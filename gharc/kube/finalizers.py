"""Finalizer helpers that never clobber somebody else's finalizer.

``metadata.finalizers`` is a list, and a JSON merge patch replaces lists whole. Two
controllers each adding their own finalizer from stale reads would drop each other's, so
every write here carries the resourceVersion it was computed from: a concurrent change
makes it fail with Conflict (and the reconcile retries from a fresh read) instead of
silently winning. Without a change to make, no request is sent.

:func:`set_finalizers` is the version for hot objects that others write all the time
(runner status from the listener, from kubelet-driven updates): a JSON patch that
``test``s the finalizer list it was computed from, so it fails only when the *finalizers*
changed, not on every unrelated write (the resourceVersion lock turned each of those into
a 409 and a retry).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.resources import Resource

__all__ = ["add_finalizer", "remove_finalizer", "set_finalizers"]

JSON = dict[str, Any]


async def add_finalizer(
    client: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> Mapping[str, Any]:
    """Append ``finalizer`` (optimistically locked); returns the updated object, or ``obj``
    unchanged when it was already there. Raises Conflict if ``obj`` is stale."""
    if objects.has_finalizer(obj, finalizer):
        return obj
    return await client.merge_patch(
        resource,
        obj,
        {"metadata": {"finalizers": objects.finalizers_with(obj, finalizer)}},
        optimistic_lock=True,
    )


async def remove_finalizer(
    client: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> Mapping[str, Any]:
    """Remove ``finalizer`` (optimistically locked); returns the updated object (which may be
    gone already if it was the last finalizer of a deleted object), or ``obj`` unchanged."""
    if not objects.has_finalizer(obj, finalizer):
        return obj
    remaining = objects.finalizers_without(obj, finalizer)
    return await client.merge_patch(
        resource, obj, {"metadata": {"finalizers": remaining or None}}, optimistic_lock=True
    )


async def set_finalizers(
    client: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizers: list[str]
) -> JSON:
    """Replace the finalizer list, provided it is still the one ``obj`` shows.

    Raises Conflict when the list changed meanwhile (the server answers a failed ``test``
    with 422; it is reported as the conflict it is). An object read without finalizers
    falls back to the resourceVersion lock: there is no list to test.
    """
    current = list(objects.meta(obj).get("finalizers") or ())
    if not current:
        return await client.merge_patch(
            resource, obj, {"metadata": {"finalizers": finalizers or None}}, optimistic_lock=True
        )
    ops: list[JSON] = [{"op": "test", "path": "/metadata/finalizers", "value": current}]
    if finalizers:
        ops.append({"op": "replace", "path": "/metadata/finalizers", "value": finalizers})
    else:
        ops.append({"op": "remove", "path": "/metadata/finalizers"})
    try:
        return await client.json_patch(resource, obj, ops)
    except kerrors.Invalid as err:
        raise kerrors.Conflict(err.message, status=409, reason="Conflict", body=err.body) from err
