"""Kubernetes Events for the scale set reconcilers' decisions (what ``kubectl describe`` shows).

Reconcilers take any recorder with ``record(obj, type, reason, message)`` (sync or async;
:class:`gharc.kube.events.EventRecorder` in production, an in-memory list in tests), and
:func:`emit` never lets a failed event fail a reconcile: an event is a courtesy to the
user, the status is the record. The same line goes to the log, which outlives Events.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from gharc.kube import objects

__all__ = ["EventRecorder", "emit"]

log = logging.getLogger(__name__)


class EventRecorder(Protocol):
    def record(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> Any: ...


async def emit(
    recorder: EventRecorder | None,
    obj: Mapping[str, Any],
    event_type: str,
    reason: str,
    message: str,
) -> None:
    """Record one event on ``obj`` and log it; errors are logged, never raised."""
    meta = objects.meta(obj)
    log.info(
        "%s %s/%s: %s: %s",
        obj.get("kind"),
        meta.get("namespace"),
        meta.get("name"),
        reason,
        message,
    )
    if recorder is None:
        return
    try:
        result = recorder.record(obj, event_type, reason, message)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.warning("could not record event %s on %s", reason, meta.get("name"), exc_info=True)
