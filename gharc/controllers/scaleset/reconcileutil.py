"""Small helpers the AutoscalingRunnerSet and AutoscalingListener reconcilers share.

Events come from :mod:`gharc.controllers.scaleset.events` and finalizers from
:mod:`gharc.kube.finalizers`; this module only adds what neither has: tolerating an
object that vanished while we removed our finalizer, and metav1.Time round trips.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gharc.kube import finalizers
from gharc.kube.client import KubeClient
from gharc.kube.errors import NotFound
from gharc.kube.resources import Resource


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once ``metadata.deletionTimestamp`` is set."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


async def remove_finalizer(
    kube: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> None:
    """:func:`gharc.kube.finalizers.remove_finalizer`, where an object already gone is fine."""
    try:
        await finalizers.remove_finalizer(kube, resource, obj, finalizer)
    except NotFound:
        pass


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it, or None."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC, seconds precision (what ``metav1.Time`` serialises to)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
