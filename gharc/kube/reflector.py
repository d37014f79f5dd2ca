"""List, then watch from the list's resourceVersion; relist only when the server says so.

The contract that keeps a cache correct (client-go's reflector):

1. A consistent, paginated LIST gives the full state and a resourceVersion (RV).
2. A WATCH from that RV delivers every later change exactly once, in order. Each event
   advances our RV; so do BOOKMARK events, which the server sends on quiet streams
   (``allowWatchBookmarks``) so a reconnect does not start from an RV that etcd has since
   compacted.
3. When the stream ends (server timeout, connection drop, read inactivity) we watch again
   from the last RV: nothing is lost and nothing is repeated.
4. When the server answers 410 Gone (HTTP, or an ERROR event with code 410), the RV is
   compacted away and the changes in between are unknowable: we LIST again and hand the
   whole state to the sink, which computes the differences (including deletions we never
   saw). We never "reset the RV and watch from now", which would silently lose events
   (the maintainer's argument in tomplus/kubernetes_asyncio PR #327).

Other failures back off exponentially (0.8 s doubling to 30 s, jittered, as client-go),
and the backoff resets once a watch has delivered something.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.resources import Resource

__all__ = ["Reflector", "ReflectorSink", "WatchSettings"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchSettings:
    page_size: int = 500
    """Objects per LIST page; keeps one response (and its decode) bounded in memory."""
    min_watch_timeout: int = 300
    """Server-side ``timeoutSeconds`` is drawn from [min, 2*min) so that many informers
    do not reconnect in lock-step (client-go: 5 to 10 minutes)."""
    read_timeout: float = 150.0
    """Silence after which the connection is presumed dead. Bookmarks arrive about once a
    minute on healthy streams, so 150 s means two missed bookmarks (kopf's reasoning)."""
    backoff_initial: float = 0.8
    backoff_max: float = 30.0


class ReflectorSink(Protocol):
    """Where the reflector delivers state; implemented by the informer."""

    def replace(self, items: list[JSON], resource_version: str) -> None: ...

    def apply(self, event_type: str, obj: JSON, resource_version: str) -> None: ...

    def bookmark(self, resource_version: str) -> None: ...


class Reflector:
    """Keeps a sink in step with the API server until cancelled."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        sink: ReflectorSink,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        settings: WatchSettings | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.settings = settings or WatchSettings()
        self.resource_version = ""
        self.lists = 0
        """How many LISTs were made (1 + relists); tests read it to prove a relist happened."""
        self.watches = 0
        self._backoff = self.settings.backoff_initial

    async def run(self) -> None:
        """List and watch forever; only cancellation ends it.

        Run again after a cancellation, it resumes watching from the last resourceVersion
        (the sink still holds that state), and relists only if the server says it expired.
        """
        resume = self.lists > 0 and bool(self.resource_version)
        while True:
            if not resume:
                try:
                    await self._list()
                except asyncio.CancelledError:
                    raise
                except Exception as err:
                    await self._sleep_backoff("list", err)
                    continue
            resume = False
            await self._watch_until_gone()

    async def _list(self) -> None:
        # NB: no resourceVersion: a quorum read, so a relist never goes back in time.
        result = await self.client.list_objects(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.settings.page_size,
        )
        self.lists += 1
        self.resource_version = result.resource_version
        self.sink.replace(result.items, result.resource_version)

    async def _watch_until_gone(self) -> None:
        """Watch from the current RV, reconnecting, until the RV expires (410)."""
        while True:
            try:
                began = asyncio.get_running_loop().time()
                delivered = await self._watch_once()
                quick = asyncio.get_running_loop().time() - began < 1.0
                if not delivered and quick:
                    # NB: a stream that ends at once with nothing in it must not spin.
                    await self._sleep_backoff("watch", EOFError("empty watch stream"))
            except asyncio.CancelledError:
                raise
            except kerrors.Gone as err:
                log.info(
                    "%s: watch expired at RV %s (%s); relisting",
                    self.resource,
                    self.resource_version,
                    err.message,
                )
                return
            except (kerrors.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as err:
                # ValueError: a malformed line (e.g. a truncated JSON at a dropped connection).
                await self._sleep_backoff("watch", err)

    async def _watch_once(self) -> bool:
        """One watch request; True if it delivered at least one event."""
        delivered = False
        timeout = int(self.settings.min_watch_timeout * (1 + random.random()))
        self.watches += 1
        events = self.client.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout,
            read_timeout=self.settings.read_timeout,
        )
        try:
            async for event in events:
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    raise kerrors.error_from_status(obj)
                rv = str(objects.meta(obj).get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    if rv:
                        self.resource_version = rv
                        self.sink.bookmark(rv)
                elif kind in ("ADDED", "MODIFIED", "DELETED"):
                    if rv:
                        self.resource_version = rv
                    self.sink.apply(kind, obj, rv)
                else:
                    log.warning("%s: unknown watch event type %r", self.resource, kind)
                    continue
                delivered = True
                self._backoff = self.settings.backoff_initial
        finally:
            await events.aclose()
        return delivered

    async def _sleep_backoff(self, what: str, err: BaseException) -> None:
        delay = self._backoff * (1 + random.random() * 0.5)
        self._backoff = min(self._backoff * 2, self.settings.backoff_max)
        log.warning("%s: %s failed (%r); retrying in %.1f s", self.resource, what, err, delay)
        await asyncio.sleep(delay)
