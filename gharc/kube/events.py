"""Kubernetes Events from controllers, without slowing reconciles down.

``record()`` never blocks and never raises: it puts the event on a bounded queue that a
background task writes (client-go's broadcaster does the same). Events are for humans
(``kubectl describe``); losing one under pressure is better than stalling a reconcile.

Repeats of the same (object, type, reason, message) within ``aggregation_window`` update
one Event's ``count`` and ``lastTimestamp`` instead of creating new objects, the way
``kubectl`` expects, so a listener backing off for an hour is one event with a count,
not three hundred events.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.clock import Clock, LoopClock
from gharc.kube.resources import EVENTS

__all__ = ["NORMAL", "WARNING", "EventRecorder"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

JSON = dict[str, Any]


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    at: float


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Usage::

    recorder = EventRecorder(kube, component="gharc-controller")
    recorder.record(listener, WARNING, "BackOff", "listener failed 3 times; retry at 12:00")
    await recorder.flush()     # tests; the manager's shutdown calls close()
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str,
        host: str = "",
        aggregation_window: float = 600.0,
        max_queue: int = 1000,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.aggregation_window = aggregation_window
        self._clock = clock or LoopClock()
        self._queue: asyncio.Queue[tuple[JSON, str, str, str]] = asyncio.Queue(max_queue)
        self._seen: dict[tuple[str, str, str, str], _Seen] = {}
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def record(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Queue an event about ``obj`` (``type`` is NORMAL or WARNING)."""
        if type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        meta = objects.meta(obj)
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        try:
            self._queue.put_nowait(
                ({k: v for k, v in involved.items() if v}, type, reason, message[:1024])
            )
        except asyncio.QueueFull:
            self.dropped += 1
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._writer(), name="event-recorder"
            )

    async def flush(self) -> None:
        """Wait until every queued event has been written (or failed)."""
        await self._queue.join()

    async def close(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), 5)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _writer(self) -> None:
        while True:
            involved, type, reason, message = await self._queue.get()
            try:
                await self._write(involved, type, reason, message)
            except Exception as err:  # NB: events are best effort; never kill the writer
                log.warning(
                    "could not record event %s on %s: %r", reason, involved.get("name"), err
                )
            finally:
                self._queue.task_done()

    async def _write(self, involved: JSON, type: str, reason: str, message: str) -> None:
        namespace = involved.get("namespace") or "default"
        key = (str(involved.get("uid") or involved.get("name")), type, reason, message)
        now_mono = self._clock.now()
        seen = self._seen.get(key)
        now = _now()
        if seen is not None and now_mono - seen.at < self.aggregation_window:
            try:
                await self.client.merge_patch(
                    EVENTS,
                    seen.name,
                    {"count": seen.count + 1, "lastTimestamp": now},
                    namespace=seen.namespace,
                )
                seen.count += 1
                seen.at = now_mono
                return
            except kerrors.NotFound:
                pass  # expired (events have a TTL); create a fresh one
        name = f"{involved.get('name')}.{secrets.token_hex(8)}"
        body = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "reportingComponent": self.component,
            "reportingInstance": self.host or self.component,
        }
        await self.client.create(EVENTS, body)
        self._seen[key] = _Seen(name, namespace, 1, now_mono)
        if len(self._seen) > 4096:  # bound memory: drop the oldest half
            for k, _ in sorted(self._seen.items(), key=lambda kv: kv[1].at)[:2048]:
                del self._seen[k]
