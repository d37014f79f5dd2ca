"""The shared informer cache and the cache-backed reader (controller-runtime's cache.Cache).

One informer per (resource, namespace scope, label selector), however many controllers
ask: every extra watch of the same kind would cost a connection, a full copy of the
objects in memory and one more decode of every change.

Reads through :class:`Cache` are served from memory and may lag the API server by the
watch latency. That is fine for deciding *what to do* (the next event triggers another
reconcile) but not for counters or markers that a previous reconcile just wrote: read those
with the uncached :class:`gharc.kube.client.KubeClient` (controller-runtime's
``GetAPIReader``), as behaviour B3 requires.

**Objects returned by the cache are shared with the informer and other controllers and
must not be mutated** (see gharc.kube.store). ``get(..., copy=True)`` gives a private copy.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient, Reader
from gharc.kube.informer import Informer, Transform, compact
from gharc.kube.labels import Selector
from gharc.kube.reflector import WatchSettings
from gharc.kube.resources import Resource
from gharc.kube.store import IndexFunc, copy_object

__all__ = ["Cache", "CacheNotStarted"]

JSON = dict[str, Any]
Selectors = str | tuple[str, ...]
"""A label selector, or several: objects matching any of them (see Informer)."""
InformerKey = tuple[Resource, str | None, Selectors | None]


class CacheNotStarted(RuntimeError):
    """A cache read before ``start()``: it would wait forever for a sync that never comes."""


class Cache(Reader):
    """Usage::

        cache = Cache(kube, namespace="arc-runners", label_selectors={PODS: "app=runner"})
        informer = cache.informer(PODS)          # shared
        cache.add_indexer(PODS, BY_OWNER_UID, index_by_owner_uid)
        await cache.start()
        await cache.wait_for_sync(timeout=30)
        pods = await cache.list(PODS, namespace="arc-runners", index=(BY_OWNER_UID, uid))

    **Parameters:**

    * ``namespace`` - watch only this namespace (``None``: all namespaces).
    * ``namespaces`` - watch only these namespaces (one store per kind, one list+watch per
      namespace), for controllers whose RBAC is namespaced.
    * ``label_selectors`` - per-resource server-side selectors, to cache only our objects
      (e.g. pods labelled by gharc, not every pod in the cluster); a tuple caches the
      objects matching any of its selectors.
    * ``transforms`` - per-resource functions applied to every object before it is cached
      (controller-runtime's ``DefaultTransform``/``ByObject.Transform``): drop what no
      reconciler reads. The default (:func:`gharc.kube.informer.compact`) drops
      ``managedFields`` and interns keys and short strings.
    * ``settings`` - list/watch timeouts and backoff for every informer.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        namespaces: Sequence[str] = (),
        label_selectors: Mapping[Resource, Selectors] | None = None,
        transforms: Mapping[Resource, Transform] | None = None,
        settings: WatchSettings | None = None,
    ) -> None:
        self.client = client
        scopes = tuple(dict.fromkeys(namespaces))
        if len(scopes) == 1 and namespace is None:
            namespace, scopes = scopes[0], ()
        self.namespace = namespace
        self.namespaces = scopes
        self.label_selectors = dict(label_selectors or {})
        self.transforms = dict(transforms or {})
        self.settings = settings
        self._informers: dict[InformerKey, Informer] = {}
        self._started = False

    # -- informers ---------------------------------------------------------------------
    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: Selectors | None = None,
    ) -> Informer:
        """The shared informer for ``resource`` (created, and started if the cache runs).

        Without arguments the cache's default scope and the resource's configured selector
        apply; that is the informer that ``get``/``list`` read from.
        """
        ns = namespace if namespace is not None else self.namespace
        scopes: tuple[str, ...] = () if namespace is not None else self.namespaces
        if not resource.namespaced:
            ns, scopes = None, ()
        selector = (
            label_selector if label_selector is not None else self.label_selectors.get(resource)
        )
        key = (resource, ",".join(scopes) if scopes else ns, selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client,
                resource,
                namespace=None if scopes else ns,
                namespaces=scopes,
                label_selector=selector,
                settings=self.settings,
                transform=self.transforms.get(resource, compact),
            )
            self._informers[key] = informer
            if self._started:
                informer.start()
        return informer

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def add_indexer(self, resource: Resource, name: str, func: IndexFunc) -> None:
        """Add an index to the default informer of ``resource``."""
        self.informer(resource).add_indexer(name, func)

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._started

    async def start(self) -> None:
        """Start every informer (and any created later); returns at once."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(i.stop() for i in self._informers.values()))

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self._informers.values())

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer created so far has listed; False on timeout."""
        try:
            async with asyncio.timeout(timeout):
                for informer in builtins.list(self._informers.values()):
                    await informer.wait_for_sync()
        except TimeoutError:
            return False
        return True

    # -- Reader ------------------------------------------------------------------------
    async def _synced_informer(self, resource: Resource) -> Informer:
        if not self._started:
            raise CacheNotStarted(f"cache read of {resource} before Cache.start()")
        informer = self.informer(resource)
        if not informer.has_synced:
            await informer.wait_for_sync()
        return informer

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, copy: bool = False
    ) -> JSON:
        """The cached object; raises NotFound like the API would. Shared unless ``copy``."""
        informer = await self._synced_informer(resource)
        obj = informer.store.get(namespace if resource.namespaced else None, name)
        if obj is None:
            raise kerrors.NotFound(f'{resource} "{name}" not found in cache', reason="NotFound")
        return copy_object(obj) if copy else obj

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        index: tuple[str, str] | None = None,
    ) -> builtins.list[JSON]:
        """Cached objects filtered by namespace, label selector and/or one index lookup.

        ``field_selector`` is not supported from memory (use an index); it raises ValueError.
        """
        if field_selector:
            raise ValueError("the cache does not evaluate field selectors; add an index instead")
        informer = await self._synced_informer(resource)
        return self.list_now(
            informer, namespace=namespace, label_selector=label_selector, index=index
        )

    @staticmethod
    def list_now(
        informer: Informer,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
    ) -> builtins.list[JSON]:
        """The synchronous core of :meth:`list`, for callers already holding an informer."""
        store = informer.store
        if index is not None:
            objs = store.by_index(*index)
            if namespace is not None:
                objs = [o for o in objs if objects.meta(o).get("namespace", "") == namespace]
        else:
            objs = store.list(namespace)
        if label_selector:
            selector = Selector.parse(label_selector)
            objs = [o for o in objs if selector.matches_object(o)]
        return objs
