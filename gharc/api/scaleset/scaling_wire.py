"""B3's wire protocol: what the listener writes to scale and what the set writes back.

Two processes speak it (a listener pod and the controller, or both sides inside the
controller with in-process listeners), so both build their writes here; a field renamed on
one side only would make the listener scale on statistics the set already cleaned up.

- The listener's scaling decision: a JSON merge patch of ``spec.replicas`` and
  ``spec.patchID`` (``patchID`` always sent: the CRD requires it; 0 means "no job
  pending", which allows scale-down).
- The set's cleanup marker: after it deleted the runners of finished jobs under patch N,
  it records ``status.finishedRunnerCleanupPatchID = N``, but only while ``spec.patchID``
  is still the value it read (a JSON patch ``test``), so a marker never claims a patch it
  did not see. The listener reads the marker and rebuilds its count from newer statistics.
- The listener's guarded decision: a scaling patch that applies only while the marker it
  knew is still the set's (so a count built on statistics read before a cleanup is never
  committed).
- A template change (B4) clears the marker, as the set's runners are all new.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PATCH_ID_FIELD = "patchID"
CLEANUP_MARKER_FIELD = "finishedRunnerCleanupPatchID"


def replicas_patch(replicas: int, patch_id: int) -> dict[str, dict[str, int]]:
    """The listener's merge patch of its EphemeralRunnerSet."""
    return {"spec": {"replicas": replicas, PATCH_ID_FIELD: patch_id}}


def replicas_after_marker_ops(replicas: int, patch_id: int, marker: int) -> list[dict[str, Any]]:
    """The listener's scaling decision as a JSON patch that applies only while the set's
    cleanup marker is still ``marker`` (the one known before the decision's statistics were
    read); a moved marker answers 422 and the listener rebuilds its count."""
    return [
        {"op": "test", "path": f"/status/{CLEANUP_MARKER_FIELD}", "value": marker},
        {"op": "add", "path": "/spec/replicas", "value": replicas},
        {"op": "add", "path": f"/spec/{PATCH_ID_FIELD}", "value": patch_id},
    ]


def cleanup_marker_ops(
    read_patch_id: Any, marker: int, counts: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The set's JSON patch (status subresource) recording ``marker``, conditioned on
    ``spec.patchID`` still being ``read_patch_id``; the status counts ride along."""
    return [
        {"op": "test", "path": f"/spec/{PATCH_ID_FIELD}", "value": read_patch_id},
        {"op": "add", "path": f"/status/{CLEANUP_MARKER_FIELD}", "value": marker},
        *({"op": "add", "path": f"/status/{k}", "value": v} for k, v in counts.items()),
    ]


def cleanup_marker_status(marker: int, counts: Mapping[str, Any]) -> dict[str, Any]:
    """The same record as a merge patch, for a set whose spec or status is still empty
    (a JSON patch ``add`` under a missing ``/status`` fails)."""
    return {"status": {**counts, CLEANUP_MARKER_FIELD: marker}}
