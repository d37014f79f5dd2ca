"""A :class:`~gharc.kube.transport.Transport` over httpx, for processes that carry no aiohttp.

The pod listener talks to GitHub with httpx; sending its few Kubernetes requests (patch the
EphemeralRunnerSet, watch it, record the session) over the same library instead of
kubernetes_asyncio's aiohttp session keeps one HTTP stack in the process (module doc of
:mod:`gharc.kube.transport`). Its own connection pool: the API server is another host.
Without a proxy the requests skip httpx's client for :mod:`gharc.http11`, as the
Actions service's calls do (see :class:`HttpxTransport`): the same stack, less CPU.
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from gharc.http11 import DirectHTTP, DirectStream
from gharc.kube.leanconfig import LeanConfig

__all__ = ["HttpxTransport"]

USER_AGENT = "gharc-listener"


def ssl_context(cfg: LeanConfig) -> ssl.SSLContext:
    """TLS as the kubeconfig says: its CA (else the system's), client certificate, or none."""
    ctx = ssl.create_default_context(cafile=cfg.ca_file, cadata=cfg.ca_data)
    if cfg.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.client_cert_pem and cfg.client_key_pem:
        # ssl loads a certificate chain from files only: a private file, gone once loaded.
        fd, path = tempfile.mkstemp(prefix="gharc-kube-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(cfg.client_cert_pem + b"\n" + cfg.client_key_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
    return ctx


class _HttpxResponse:
    """A streamed answer: httpx's, or a watch's over :class:`~gharc.http11.DirectHTTP`
    (whose reading methods are named as httpx's)."""

    def __init__(self, resp: httpx.Response | DirectStream) -> None:
        self._resp = resp

    @property
    def status(self) -> int:
        return self._resp.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._resp.headers

    async def read(self) -> bytes:
        try:
            return await self._resp.aread()
        except httpx.TransportError as err:
            raise _os_error(err) from err
        finally:
            await self._resp.aclose()

    async def lines(self) -> AsyncIterator[bytes]:
        pending = b""
        try:
            async for chunk in self._resp.aiter_raw():
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    yield line + b"\n"
        except httpx.TransportError as err:
            raise _os_error(err) from err
        if pending:
            yield pending

    async def aclose(self) -> None:
        await self._resp.aclose()


class _ReadResponse(_HttpxResponse):
    """An answer :class:`~gharc.http11.DirectHTTP` has read whole: its status and
    headers are read as a streamed one's, its body from memory with nothing to close."""

    _resp: httpx.Response

    async def read(self) -> bytes:
        return self._resp.content

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._resp.content.splitlines(keepends=True):
            yield line

    async def aclose(self) -> None:
        return None


def _os_error(err: httpx.TransportError) -> OSError:
    """httpx's transport errors as the OSError / TimeoutError callers already handle."""
    if isinstance(err, httpx.TimeoutException):
        return TimeoutError(f"{type(err).__name__}: {err}")
    return ConnectionError(f"{type(err).__name__}: {err}")


class HttpxTransport:
    """One httpx.AsyncClient to one API server; the bearer token is added per request, so
    a rotated service account token is picked up without a restart.

    Requests go over :class:`~gharc.http11.DirectHTTP` unless a proxy is in the
    way: a listener patches its EphemeralRunnerSet about once per job, and through
    ``httpx.AsyncClient`` each patch cost about 1 ms of CPU, a third of the listener's,
    against 0.1 ms; its watch of the set reads an event for each of those patches and each
    status change the controller makes."""

    def __init__(self, cfg: LeanConfig, *, pool_size: int = 4, proxy: str | None = None) -> None:
        self._cfg = cfg
        self.host = httpx.URL(cfg.server).netloc.decode()
        extensions_host = cfg.tls_server_name
        self._extensions: dict[str, Any] = (
            {"sni_hostname": extensions_host} if extensions_host else {}
        )
        verify = ssl_context(cfg)
        self._proxy_option = proxy
        proxy = proxy if proxy is not None else cfg.proxy
        self._http = httpx.AsyncClient(
            base_url=cfg.server,
            verify=verify,
            trust_env=False,
            proxy=proxy,
            limits=httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size),
        )
        self._server = cfg.server.rstrip("/")
        self._direct: DirectHTTP | None = None
        if not proxy:
            self._direct = DirectHTTP(
                user_agent=USER_AGENT,
                ssl_context=lambda: verify,
                max_idle=pool_size,
                server_hostname=extensions_host or None,
            )

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
    ) -> _HttpxResponse:
        all_headers = dict(headers)
        token = self._cfg.bearer_token()
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        if timeout is not None and self._direct is not None:
            try:
                answer = await self._direct.request(
                    method,
                    self._server + path,
                    endpoint=path,
                    headers=all_headers,
                    params=params,
                    json_body=body,
                    timeout=timeout,
                )
            except httpx.TransportError as err:
                raise _os_error(err) from err
            return _ReadResponse(answer)
        if self._direct is not None:  # a watch: only silence on the connection ends it
            try:
                stream = await self._direct.stream(
                    method,
                    self._server + path,
                    headers=all_headers,
                    params=params,
                    read_timeout=read_timeout,
                )
            except httpx.TransportError as err:
                raise _os_error(err) from err
            return _HttpxResponse(stream)
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        if timeout is None:  # a watch: only silence on the connection ends it
            request_timeout = httpx.Timeout(None, connect=30.0, read=read_timeout)
        else:
            request_timeout = httpx.Timeout(timeout)
        request = self._http.build_request(
            method,
            path,
            params=list(params),
            headers=all_headers,
            content=content,
            timeout=request_timeout,
            extensions=self._extensions,
        )
        try:
            resp = await self._http.send(request, stream=True)
        except httpx.TransportError as err:
            raise _os_error(err) from err
        return _HttpxResponse(resp)

    def fork(self) -> HttpxTransport:
        """A transport with connections of its own (same server and credentials), for the
        loop that calls this."""
        return HttpxTransport(self._cfg, pool_size=1, proxy=self._proxy_option)

    async def close(self) -> None:
        await self._http.aclose()
        if self._direct is not None:
            await self._direct.aclose()
