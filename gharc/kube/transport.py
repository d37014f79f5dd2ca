"""The HTTP layer under :class:`gharc.kube.client.KubeClient`, behind one small interface.

Why an interface at all: the controller speaks to the API server through kubernetes_asyncio's
ApiClient (aiohttp; exec plugins, OIDC and every kubeconfig form), but a listener pod needs
only a bearer token and a CA, and importing aiohttp plus the ApiClient costs it about
20 MiB of its 40 MiB budget. The pod listener therefore uses :mod:`gharc.kube.httpx_transport`
over the httpx stack it already carries for GitHub; both implement :class:`Transport`, so
:class:`KubeClient` keeps one request path, one error mapping and one request counter.

Connection failures surface as :class:`OSError` / :class:`TimeoutError` from the httpx
transport and as ``aiohttp.ClientError`` from the ApiClient transport (as before).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["ApiClientTransport", "Response", "Transport"]


class Response(Protocol):
    """A response whose body has not been read yet (read it, or iterate its lines)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def read(self) -> bytes: ...

    def lines(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Transport(Protocol):
    """Sends one request to the API server, authenticated; ``host`` labels metrics."""

    host: str

    async def send_request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        body: Any,
        timeout: float | None,
        read_timeout: float | None = None,
    ) -> Response:
        """``timeout`` bounds the whole request (None: a watch, bounded only by
        ``read_timeout``, the longest silence allowed on the connection)."""
        ...

    async def close(self) -> None: ...


class _AiohttpResponse:
    """Adapts ``aiohttp.ClientResponse`` to :class:`Response`."""

    def __init__(self, resp: Any) -> None:
        self._resp = resp

    @property
    def status(self) -> int:
        return int(self._resp.status)

    @property
    def headers(self) -> Mapping[str, str]:
        headers: Mapping[str, str] = self._resp.headers
        return headers

    async def read(self) -> bytes:
        data: bytes = await self._resp.read()
        return data

    async def lines(self) -> AsyncIterator[bytes]:
        async for line in self._resp.content:
            yield line

    async def aclose(self) -> None:
        self._resp.close()


class ApiClientTransport:
    """kubernetes_asyncio's ApiClient as a :class:`Transport` (auth, TLS, its aiohttp pool)."""

    def __init__(self, api_client: Any, *, owns: bool = False) -> None:
        import urllib.parse

        self.api_client = api_client
        self._owns = owns
        configuration = getattr(api_client, "configuration", None)
        self.host = urllib.parse.urlsplit(str(getattr(configuration, "host", "") or "")).netloc

    async def send_request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        body: Any,
        timeout: float | None,
        read_timeout: float | None = None,
    ) -> Response:
        import aiohttp

        request_timeout: float | aiohttp.ClientTimeout | None = timeout
        if timeout is None:
            request_timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=30, sock_read=read_timeout
            )
        resp = await self.api_client.call_api(
            path,
            method,
            query_params=list(params) or None,
            header_params=dict(headers),
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=request_timeout,
        )
        return _AiohttpResponse(resp)

    def fork(self) -> ApiClientTransport:
        """A transport with its own aiohttp session (same configuration), for the loop
        that calls this."""
        from kubernetes_asyncio.client import ApiClient

        from gharc.kube.config import _without_trust_env

        api = ApiClient(self.api_client.configuration)
        _without_trust_env(api)
        return ApiClientTransport(api, owns=True)

    async def close(self) -> None:
        if self._owns:
            await self.api_client.close()
