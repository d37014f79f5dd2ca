"""An async Kubernetes client that speaks plain dicts, over a small :mod:`~gharc.kube.transport`.

Why dicts: decoding a 1,000-pod list into kubernetes_asyncio models takes ~800 ms against
~36 ms for ``json.loads`` (python-ecosystem.md 2.6), and informers decode every object the
cluster changes. So we borrow only the ApiClient's session, auth (token refresh, client
certs, exec plugins) and TLS, call ``call_api(..., _preload_content=False)`` and parse the
body ourselves. One class addresses every kind through a :class:`Resource`, so our CRDs and
core kinds share one code path, one error mapping and one request counter.

This client is the *uncached* reader (controller-runtime's ``GetAPIReader``) and the writer.
Reads that can tolerate a slightly stale view go through :class:`gharc.kube.cache.Cache`.

Every request is counted in ``gharc_kube_api_requests_total{verb,resource,code}``.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import contextlib
import copy
import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import metrics, objects
from gharc.kube.fence import WriteFence
from gharc.kube.inflight import BACKLOG_REST, NamespaceInFlight
from gharc.kube.ratelimit import FairTokenBucket
from gharc.kube.resources import Resource
from gharc.kube.shardfence import ShardFences
from gharc.kube.transport import Response, Transport

__all__ = ["KubeClient", "ObjectList", "PatchType", "Reader", "object_key"]


def _api_client_transport(api_client: Any) -> Transport:
    from gharc.kube.transport import ApiClientTransport

    return ApiClientTransport(api_client)


log = logging.getLogger(__name__)

JSON = dict[str, Any]


class PatchType(StrEnum):
    """Content types of PATCH. Strategic merge does not work for CRDs; prefer MERGE."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(slots=True)
class ObjectList:
    """The items of a (possibly paginated) list, and the resourceVersion to watch from."""

    items: list[JSON]
    resource_version: str


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object; namespace is ``""`` for cluster-scoped ones."""
    meta = objects.meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Reader:
    """What both the cache and the client can answer (controller-runtime's client.Reader)."""

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        raise NotImplementedError

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[JSON]:
        raise NotImplementedError


def _selector(value: str | Mapping[str, str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or None


_CHILDREN: dict[tuple[str, str, str, str, str, str], tuple[Any, Any, Any, Any, Any]] = {}
"""The labelled metric children of each (verb, resource, code, method, caller, host): every
request updates five, and ``labels()`` validates and sorts its arguments on each call."""


def _children(
    verb: str, label: str, code: str, method: str, host: str, caller: str
) -> tuple[Any, Any, Any, Any, Any]:
    upper = method.upper()
    return (
        metrics.API_REQUESTS.labels(verb=verb, resource=label, code=code),
        metrics.REST_CLIENT_REQUESTS.labels(
            code="<error>" if code == "error" else code, method=upper, host=host
        ),
        metrics.REST_CLIENT_REQUEST_DURATION.labels(verb=upper, host=host),
        metrics.API_REQUESTS_BY_CALLER.labels(caller=caller, verb=verb, resource=label)
        if caller
        else None,
        metrics.API_REQUEST_DURATION.labels(verb=verb, resource=label),
    )


class KubeClient(Reader):
    """Usage::

        api = await config.new_api_client(kubeconfig=path)
        async with KubeClient(api) as kube:
            pod = await kube.get(PODS, "runner-1", namespace="arc")
            await kube.merge_patch(PODS, pod, {"metadata": {"labels": {"a": "b"}}},
                                   optimistic_lock=True)

    **Parameters:**

    * ``api_client`` - a kubernetes_asyncio ApiClient, or any :class:`Transport`; closed by
      ``close()`` only when ``owns_api_client`` is true (the default for :meth:`from_config`).
    * ``qps``/``burst`` - an optional client-side token bucket over all requests, like
      client-go's (default off: API priority and fairness protects the server).
    * ``request_timeout`` - total seconds for one non-watch request.
    * ``max_retries`` - how often a 429 (or 5xx) that carries ``Retry-After`` is retried
      after sleeping that long (at most ``max_retry_after`` seconds per attempt).
    * ``field_manager`` - the manager name for server-side apply and writes.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        qps: float | None = None,
        burst: int = 10,
        request_timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_after: float = 10.0,
        field_manager: str = "gharc",
        owns_api_client: bool = False,
        max_in_flight_per_namespace: int = 0,
        backlog_rest: float = BACKLOG_REST,
    ) -> None:
        self.api_client = api_client
        self.transport: Transport = (
            api_client if isinstance(api_client, Transport) else _api_client_transport(api_client)
        )
        self.field_manager = field_manager
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.max_retry_after = max_retry_after
        self._bucket = FairTokenBucket(qps=qps, burst=burst) if qps else None
        self._in_flight = (
            NamespaceInFlight(max_in_flight_per_namespace, rest=backlog_rest)
            if max_in_flight_per_namespace
            else None
        )
        """Requests in flight per namespace (watches excepted); shared by caller views."""
        self._owns = owns_api_client
        self.request_counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._host = self.transport.host
        """Requests made by *this* client by (verb, resource, code); tests and the demo read it."""
        self.fence = WriteFence()
        """Checked before every write; the manager arms it when leader election is on.
        Shared by every :meth:`for_caller` view, so a listener's patch is fenced too."""
        self.shard_fences: ShardFences | None = None
        """With ``--shards`` > 1: a write made while acting for a shard is also checked
        against that shard's fence (:mod:`gharc.kube.shardfence`). Set it before making
        :meth:`for_caller` views, which share it."""
        self.caller = ""
        """Set on a :meth:`for_caller` view: its requests are also counted under this name."""

    def write_time_left(self, method: str, what: str) -> float:
        """Seconds a write of ``method`` to ``what`` may still take (``inf`` unfenced);
        raises :class:`~gharc.kube.fence.NotLeading` when this replica may not write now.

        The gate of this client's own writes and of the controller's calls that change
        GitHub's state alike: one replica proves it may act once, for both."""
        left = self.fence.check(method, what)
        if self.shard_fences is not None:
            left = min(left, self.shard_fences.check(method, what))
        return left

    def for_caller(self, caller: str) -> KubeClient:
        """A view of this client (same session, rate limit and counters) whose requests are
        also counted in ``gharc_kube_api_requests_by_caller_total{caller=...}``: so the
        listeners hosted in the controller process can be told apart from its reconcilers."""
        view = copy.copy(self)
        view.caller = caller
        view._owns = False
        return view

    def exempt_from_in_flight_limit(self, namespace: str) -> None:
        """Requests in ``namespace`` (the controller's own) are not capped per namespace
        and do not make tenants share (:mod:`gharc.kube.inflight`)."""
        if self._in_flight is not None and namespace:
            self._in_flight.exempt.add(namespace)

    @classmethod
    async def from_config(
        cls,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool | None = None,
        pool_size: int = 100,
        proxy: str | None = None,
        lean: bool = False,
        **options: Any,
    ) -> KubeClient:
        """A client with its own ApiClient (closed with the client); ``proxy`` as in
        :func:`gharc.kube.config.new_api_client`.

        ``lean``: when the kubeconfig is a token, a CA or a client certificate (always so in
        a pod), send over httpx (:mod:`gharc.kube.httpx_transport`) and never import aiohttp
        or kubernetes_asyncio; other kubeconfigs still get the full client."""
        if lean:
            from gharc.kube import leanconfig

            settings = leanconfig.load(
                kubeconfig=kubeconfig, context=context, in_cluster=in_cluster
            )
            if settings is not None:
                from gharc.kube.httpx_transport import HttpxTransport

                transport = HttpxTransport(
                    settings, pool_size=pool_size, proxy=None if proxy is None else proxy or None
                )
                return cls(transport, owns_api_client=True, **options)
        from gharc.kube.config import new_api_client

        api = await new_api_client(
            kubeconfig=kubeconfig,
            context=context,
            in_cluster=in_cluster,
            pool_size=pool_size,
            proxy=proxy,
        )
        return cls(api, owns_api_client=True, **options)

    def fork(self) -> KubeClient:
        """A client of its own (connections included) to the same server with the same
        credentials, for another event loop; create it in that loop. Its writes are not
        fenced: the leader Lease keeper uses it. Raises TypeError for a transport that
        cannot be copied."""
        fork = getattr(self.transport, "fork", None)
        if fork is None:
            raise TypeError(f"{type(self.transport).__name__} cannot be forked")
        return KubeClient(
            fork(),
            owns_api_client=True,
            field_manager=self.field_manager,
            request_timeout=self.request_timeout,
            max_retries=self.max_retries,
            max_retry_after=self.max_retry_after,
        )

    async def close(self) -> None:
        if self._owns:
            await self.api_client.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- transport ---------------------------------------------------------------------
    def _count(self, verb: str, label: str, code: str, began: float, method: str) -> None:
        elapsed = time.monotonic() - began
        self.request_counts[(verb, label, code)] += 1
        key = (verb, label, code, method, self.caller, self._host)
        children = _CHILDREN.get(key)
        if children is None:
            children = _children(verb, label, code, method, self._host, self.caller)
            if len(_CHILDREN) < 4096:
                _CHILDREN[key] = children
        requests, rest_requests, rest_duration, by_caller, duration = children
        requests.inc()
        rest_requests.inc()
        rest_duration.observe(elapsed)
        if by_caller is not None:
            by_caller.inc()
        duration.observe(elapsed)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        label: str,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str | None = None,
        watch_read_timeout: float | None = None,
        watch: bool = False,
    ) -> Response:
        """Send one request, retrying on Retry-After; returns a 2xx response, unread.

        ``watch`` lifts the total timeout: the stream is bounded by ``watch_read_timeout``."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        params = [(k, _query_value(v)) for k, v in query if v is not None]
        writes = method not in ("GET", "HEAD")
        attempt = 0
        while True:
            if self._bucket is not None:
                await self._bucket.wait(_namespace_of(path))
            slot: contextlib.AbstractAsyncContextManager[None] = (
                # Status writes yield to the namespace's other requests (see inflight).
                self._in_flight.slot(_namespace_of(path), low=writes and path.endswith("/status"))
                if self._in_flight is not None and not watch
                else contextlib.nullcontext()
            )
            async with slot:
                # Checked once the request may go: a write that waited for its slot while
                # the Lease was lost must not be sent (and the wait is not server latency).
                timeout = None if watch else self.request_timeout
                if writes:
                    timeout = min(self.request_timeout, self.write_time_left(method, path))
                began = time.monotonic()
                try:
                    resp = await self.transport.send_request(
                        method,
                        path,
                        params=params,
                        headers=headers,
                        body=body,
                        timeout=timeout,
                        read_timeout=watch_read_timeout,
                    )
                except BaseException:
                    self._count(verb, label, "error", began, method)
                    raise
            self._count(verb, label, str(resp.status), began, method)
            if 200 <= resp.status < 300:
                return resp
            data = await resp.read()
            error = kerrors.error_from_response(resp.status, data, resp.headers)
            retryable = error.retry_after is not None and (resp.status == 429 or resp.status >= 500)
            if retryable and attempt < self.max_retries:
                attempt += 1
                delay = min(float(error.retry_after or 0), self.max_retry_after)
                log.info(
                    "%s %s: %s, retrying in %.1f s (%d/%d)",
                    method,
                    path,
                    resp.status,
                    delay,
                    attempt,
                    self.max_retries,
                )
                await asyncio.sleep(delay)
                continue
            raise error

    async def request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        label: str,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        """A raw JSON request, for the few calls without a method here (e.g. /version)."""
        resp = await self._send(
            method, path, verb=verb, label=label, query=query, body=body, content_type=content_type
        )
        data = await resp.read()
        return json.loads(data) if data else None

    @staticmethod
    def _label(resource: Resource, subresource: str | None = None) -> str:
        return f"{resource}/{subresource}" if subresource else str(resource)

    def _target(
        self, resource: Resource, target: Mapping[str, Any] | str, namespace: str | None
    ) -> tuple[str, str | None, str | None]:
        """(name, namespace, resourceVersion) of a name or an object."""
        if isinstance(target, str):
            return target, namespace if resource.namespaced else None, None
        meta = objects.meta(target)
        ns = namespace or meta.get("namespace")
        return (
            str(meta.get("name") or ""),
            ns if resource.namespaced else None,
            meta.get("resourceVersion"),
        )

    # -- reads -------------------------------------------------------------------------
    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        """GET one object from the API server (always fresh: etcd quorum read)."""
        return await self._get(resource, name, namespace=namespace)

    async def get_status(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> JSON:
        """GET the status subresource (the whole object, as the server returns it)."""
        return await self._get(resource, name, namespace=namespace, subresource="status")

    async def _get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None,
        subresource: str | None = None,
    ) -> JSON:
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        resp = await self._send("GET", path, verb="get", label=self._label(resource, subresource))
        obj: JSON = json.loads(await resp.read())
        return obj

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[JSON]:
        """All matching objects, fetched page by page; each item has apiVersion and kind set."""
        result = await self.list_objects(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        return result.items

    async def list_objects(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        page_size: int = 500,
    ) -> ObjectList:
        """List with pagination (``limit``/``continue``), returning the list's resourceVersion.

        All pages come from one snapshot, so the returned resourceVersion is a consistent
        point to start a watch from. An expired continue token raises :class:`Gone`.
        """
        path = resource.path(namespace=namespace)
        items: list[JSON] = []
        cont: str | None = None
        rv = ""
        while True:
            query: list[tuple[str, Any]] = [
                ("labelSelector", _selector(label_selector)),
                ("fieldSelector", field_selector),
                ("limit", page_size or None),
            ]
            if cont:
                query.append(("continue", cont))
            else:
                query.append(("resourceVersion", resource_version))
                query.append(("resourceVersionMatch", resource_version_match))
            resp = await self._send(
                "GET", path, verb="list", label=self._label(resource), query=query
            )
            page = json.loads(await resp.read())
            meta = objects.meta(page)
            rv = str(meta.get("resourceVersion") or rv)
            for item in page.get("items") or ():
                # NB: list items come without apiVersion/kind; watch events carry them.
                item["apiVersion"] = resource.api_version
                item["kind"] = resource.kind
                items.append(item)
            cont = meta.get("continue")
            if not cont:
                return ObjectList(items, rv)

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        read_timeout: float | None = None,
    ) -> AsyncGenerator[JSON, None]:
        """Yield raw watch events (``{"type", "object"}`` dicts) until the server ends the stream.

        ERROR events are yielded as they come (the reflector turns them into errors);
        ``read_timeout`` bounds silence on the connection (bookmarks keep a healthy one busy).
        """
        path = resource.path(namespace=namespace)
        query: list[tuple[str, Any]] = [
            ("watch", True),
            ("resourceVersion", resource_version),
            ("labelSelector", _selector(label_selector)),
            ("fieldSelector", field_selector),
            ("allowWatchBookmarks", True if allow_bookmarks else None),
            ("timeoutSeconds", timeout_seconds),
        ]
        resp = await self._send(
            "GET",
            path,
            verb="watch",
            label=self._label(resource),
            query=query,
            watch=True,
            watch_read_timeout=read_timeout,
        )
        try:
            async for line in resp.lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await resp.aclose()

    # -- writes ------------------------------------------------------------------------
    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """POST a new object; ``namespace`` defaults to ``obj.metadata.namespace``."""
        ns = namespace or objects.meta(obj).get("namespace")
        body = dict(obj)
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        resp = await self._send(
            "POST",
            resource.path(namespace=ns if resource.namespaced else None),
            verb="create",
            label=self._label(resource),
            query=self._write_query(dry_run=dry_run),
            body=body,
        )
        created: JSON = json.loads(await resp.read())
        return created

    async def update(
        self, resource: Resource, obj: Mapping[str, Any], *, dry_run: bool = False
    ) -> JSON:
        """PUT the whole object. With ``metadata.resourceVersion`` set (as read) a concurrent
        write makes this fail with Conflict; without it the write is unconditional."""
        return await self._put(resource, obj, subresource=None, dry_run=dry_run)

    async def update_status(
        self, resource: Resource, obj: Mapping[str, Any], *, dry_run: bool = False
    ) -> JSON:
        """PUT to the status subresource: the server keeps spec and metadata as stored."""
        return await self._put(resource, obj, subresource="status", dry_run=dry_run)

    async def _put(
        self, resource: Resource, obj: Mapping[str, Any], *, subresource: str | None, dry_run: bool
    ) -> JSON:
        name, ns, _ = self._target(resource, obj, None)
        resp = await self._send(
            "PUT",
            resource.path(namespace=ns, name=name, subresource=subresource),
            verb="update",
            label=self._label(resource, subresource),
            query=self._write_query(dry_run=dry_run),
            body=dict(obj),
        )
        updated: JSON = json.loads(await resp.read())
        return updated

    async def delete(
        self,
        resource: Resource,
        target: Mapping[str, Any] | str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        missing_ok: bool = False,
        dry_run: bool = False,
    ) -> JSON | None:
        """DELETE an object, by name or given the object itself.

        ``uid``/``resource_version`` become preconditions: the server answers Conflict if the
        object was replaced (a new uid under the same name) or changed since it was read.
        ``propagation_policy`` is ``Foreground``, ``Background`` or ``Orphan``. Returns the
        server's answer (the object, now with ``deletionTimestamp``, or a Status), or None
        when ``missing_ok`` and it was already gone.
        """
        name, ns, _ = self._target(resource, target, namespace)
        options: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        try:
            resp = await self._send(
                "DELETE",
                resource.path(namespace=ns, name=name),
                verb="delete",
                label=self._label(resource),
                body=options,
            )
        except kerrors.ApiError as err:
            if missing_ok and err.status == 404:
                return None
            raise
        data = await resp.read()
        return json.loads(data) if data else None

    async def patch(
        self,
        resource: Resource,
        target: Mapping[str, Any] | str,
        body: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """PATCH with an explicit content type (merge by default; JSON patch takes a list)."""
        name, ns, _ = self._target(resource, target, namespace)
        query = self._write_query(dry_run=dry_run)
        if field_manager or patch_type is PatchType.APPLY:
            query.append(("fieldManager", field_manager or self.field_manager))
        if force is not None:
            query.append(("force", force))
        resp = await self._send(
            "PATCH",
            resource.path(namespace=ns, name=name, subresource=subresource),
            verb="patch",
            label=self._label(resource, subresource),
            query=query,
            body=body,
            content_type=str(patch_type),
        )
        patched: JSON = json.loads(await resp.read())
        return patched

    async def merge_patch(
        self,
        resource: Resource,
        target: Mapping[str, Any] | str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        optimistic_lock: bool = False,
        resource_version: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """JSON merge patch (RFC 7386: lists are replaced whole, ``None`` deletes a key).

        With ``optimistic_lock=True`` the patch carries ``metadata.resourceVersion`` (from
        ``resource_version`` or the ``target`` object), which the server treats as a
        precondition: a concurrent write since that read makes this raise Conflict (409)
        instead of silently merging into state the caller never saw. This is
        controller-runtime's ``MergeFromWithOptimisticLock``.
        """
        name, ns, rv = self._target(resource, target, namespace)
        body = dict(patch)
        if optimistic_lock:
            rv = resource_version or rv
            if not rv:
                raise ValueError("optimistic_lock needs the read object or resource_version=")
            meta = dict(objects.meta(body))
            meta["resourceVersion"] = rv
            body["metadata"] = meta
        return await self.patch(
            resource,
            name,
            body,
            namespace=ns,
            patch_type=PatchType.MERGE,
            subresource=subresource,
            dry_run=dry_run,
        )

    async def patch_status(
        self,
        resource: Resource,
        target: Mapping[str, Any] | str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        optimistic_lock: bool = False,
        resource_version: str | None = None,
    ) -> JSON:
        """Merge patch of the status subresource (the server ignores spec changes in it)."""
        return await self.merge_patch(
            resource,
            target,
            patch,
            namespace=namespace,
            optimistic_lock=optimistic_lock,
            resource_version=resource_version,
            subresource="status",
        )

    async def json_patch(
        self,
        resource: Resource,
        target: Mapping[str, Any] | str,
        operations: Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        test_resource_version: bool = False,
        subresource: str | None = None,
    ) -> JSON:
        """RFC 6902 JSON patch. ``test_resource_version`` prepends a ``test`` of the target's
        resourceVersion; note a failed test is answered 422 (Invalid), not 409 (kopf's route)."""
        ops = [dict(op) for op in operations]
        if test_resource_version:
            _, _, rv = self._target(resource, target, namespace)
            if not rv:
                raise ValueError("test_resource_version needs the read object")
            ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": rv})
        return await self.patch(
            resource,
            target,
            ops,
            namespace=namespace,
            patch_type=PatchType.JSON,
            subresource=subresource,
        )

    async def apply(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Server-side apply: ``obj`` is the whole intent of ``field_manager`` for its fields."""
        body = dict(obj)
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        return await self.patch(
            resource,
            obj,
            body,
            patch_type=PatchType.APPLY,
            subresource=subresource,
            field_manager=field_manager or self.field_manager,
            force=force,
            dry_run=dry_run,
        )

    @staticmethod
    def _write_query(*, dry_run: bool) -> builtins.list[tuple[str, Any]]:
        return [("dryRun", "All")] if dry_run else []


def _query_value(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _namespace_of(path: str) -> str:
    """The namespace a request path addresses ("" for cluster-wide ones): the client's fair
    rate limit takes turns across namespaces (tenants)."""
    _, found, rest = path.partition("/namespaces/")
    return rest.split("/", 1)[0] if found else ""
