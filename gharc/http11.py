"""Kept-alive HTTP/1.1 over asyncio streams, framed by h11: the listener's hot path.

A listener makes about five Actions service calls per job (long poll, message delete,
acquire) when each message carries one job, and a listener pod also patches and watches
Kubernetes. Through ``httpx.AsyncClient`` each call costs about 0.9 ms of CPU (URL parsing
and validation per character, header normalisation, cookie extraction, httpcore over
anyio): 4-5 ms per job, most of a listener's CPU. Here h11 (the HTTP/1.1 state machine
httpcore itself uses) frames the messages and this module only moves bytes between it and
an asyncio stream it keeps alive: about 0.15 ms a call. It still hands back
``httpx.Response`` objects and raises httpx's transport errors, so the callers' retries,
breakers and error mapping see no difference.

Deliberately small: one request at a time per connection, identity encoding (the request
says so). What it does not do (proxies, an injected test transport, the REST client's HTTP
cache) stays with httpx: the clients that own this one use it only when none of that
applies. It lives outside gharc.kube and gharc.github because both use it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote, urlsplit

import h11
import httpx

__all__ = ["DirectHTTP", "DirectResponse", "DirectStream", "merge_query"]

_MAX_HEAD = 64 * 1024
_READ_SIZE = 64 * 1024
_HEADS_KEPT = 8
"""Prepared heads of body-less requests a client keeps (see :meth:`DirectHTTP._head`)."""
_DEFAULT_FIELDS = {"accept": ("Accept", "*/*"), "accept-encoding": ("Accept-Encoding", "identity")}
Observe = Callable[[str, str, int | str, float, httpx.Headers | None], None]


def _param_str(value: Any) -> str:
    """A query value as httpx writes it (``true``/``false``, ``""`` for None)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    return str(value)


Params = Mapping[str, Any] | Sequence[tuple[str, Any]]


def merge_query(url: str, params: Params | None) -> str:
    """``url`` with ``params`` set in its query: existing keys replaced, others kept as they
    were written (a queue URL's own query is opaque and must reach the service unchanged).
    A sequence of pairs may repeat a key."""
    if not params:
        return url
    pairs = list(params.items()) if isinstance(params, Mapping) else list(params)
    keys = {k for k, _ in pairs}
    base, sep, query = url.partition("?")
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
    kept = [p for p in query.split("&") if p and p.partition("=")[0] not in keys] if sep else []
    added = [f"{quote(str(k), safe='')}={quote(_param_str(v), safe='')}" for k, v in pairs]
    merged = f"{base}?{'&'.join(kept + added)}"
    return f"{merged}#{fragment}" if fragment else merged


_Head = tuple[str, str, int, h11.Request]
"""A prepared request head: (scheme, host, port, the h11 event)."""


class DirectResponse(httpx.Response):
    """An ``httpx.Response`` built from bytes already read, whose ``request`` is made on
    first use: only error paths read it, and parsing the URL into an ``httpx.Request``
    (httpx checks it character by character) costs more than the rest of the answer."""

    def __init__(
        self,
        status: int,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
        reason: bytes,
        method: str,
        url: str,
    ) -> None:
        super().__init__(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            extensions={"reason_phrase": reason},
        )
        self._content = content  # read already: what ``read()`` would have stored
        self.is_stream_consumed = True
        self.is_closed = True
        self._method = method
        self._url = url

    @property
    def request(self) -> httpx.Request:
        if self._request is None:
            self._request = httpx.Request(self._method, self._url)
        return self._request

    @request.setter
    def request(self, value: httpx.Request) -> None:
        self._request = value


class DirectStream:
    """An answer whose body is read as it arrives; ``aclose()`` ends its connection. Its
    reading methods are named as ``httpx.Response``'s, so code written for a streamed httpx
    answer reads this one too."""

    def __init__(
        self,
        conn: _Connection,
        status: int,
        raw_headers: list[tuple[bytes, bytes]],
        read_timeout: float | None,
    ) -> None:
        self._conn = conn
        self.status_code = status
        self.headers = httpx.Headers(raw_headers)
        self._read_timeout = read_timeout

    async def _timed(self, op: Awaitable[h11.Event | type[h11.PAUSED]]) -> Any:
        async with asyncio.timeout(self._read_timeout):
            return await op

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises httpx's transport errors."""
        try:
            while True:
                event = await self._timed(self._conn.next_event())
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return
        except TimeoutError:
            raise httpx.ReadTimeout(f"no data for {self._read_timeout}s") from None

    async def aread(self) -> bytes:
        """The whole body, then the connection is closed."""
        try:
            return b"".join([chunk async for chunk in self.aiter_raw()])
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        self._conn.close()


class _Connection:
    """One stream and the h11 state machine that frames what crosses it."""

    __slots__ = ("h11", "reader", "received", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.received = 0
        """Bytes read for the current exchange: none means a reused stream went stale."""

    def usable(self) -> bool:
        """An idle connection the server has not closed (or written to) meanwhile."""
        buffered = bool(getattr(self.reader, "_buffer", None))
        return not self.writer.is_closing() and not self.reader.at_eof() and not buffered

    def close(self) -> None:
        self.writer.close()

    async def send(self, *events: h11.Event) -> None:
        try:
            data = b"".join(self.h11.send(e) or b"" for e in events)
        except h11.LocalProtocolError as err:
            raise httpx.LocalProtocolError(str(err)) from None
        self.received = 0
        self.writer.write(data)
        await self.writer.drain()

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        """h11's next event, reading from the stream as it needs data; raises httpx's
        transport errors."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as err:
                raise httpx.RemoteProtocolError(str(err)) from None
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError(
                        "Server disconnected without sending a complete response."
                    )
                return cast(h11.Event | type[h11.PAUSED], event)
            try:
                data = await self.reader.read(_READ_SIZE)
            except OSError as err:
                raise httpx.ReadError(f"reading the response failed: {err}") from None
            self.received += len(data)
            self.h11.receive_data(data)  # b"" tells h11 the server closed its side

    async def response(self) -> h11.Response:
        """The final answer's head, past informational ones (100 Continue, 103 Early Hints)."""
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise httpx.RemoteProtocolError(f"expected a response, got {event!r}")

    def reusable(self) -> bool:
        """The exchange ended cleanly and both sides keep the connection: ready for the next."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False


class _Stale(Exception):
    """A reused connection was closed by the server before any byte of the answer."""


class DirectHTTP:
    """Sends requests over kept-alive HTTP/1.1 connections, one pool per origin.

    **Parameters:**

    * ``user_agent`` - the User-Agent header of every request.
    * ``ssl_context`` - called once per TLS connection (the process's shared context).
    * ``observe`` - ``(endpoint, method, status or "error", seconds, headers)`` per request
      that left the process, the metrics :class:`~gharc.github.transport.MeteredTransport`
      records for httpx.
    * ``timeout`` - seconds for a whole request unless the call gives its own.
    * ``max_idle`` - idle connections kept per origin; ``max_connections`` - open ones per
      client (None: no cap).
    * ``server_hostname`` - the TLS server name to check instead of the URL's host (a
      kubeconfig's ``tls-server-name``).
    """

    def __init__(
        self,
        *,
        user_agent: str,
        ssl_context: Callable[[], ssl.SSLContext],
        observe: Observe | None = None,
        timeout: float = 30.0,
        max_idle: int = 20,
        max_connections: int | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.server_hostname = server_hostname
        self._ssl_context = ssl_context
        self._observe = observe
        self.timeout = timeout
        self.max_idle = max_idle
        self._slots = asyncio.Semaphore(max_connections) if max_connections else None
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Head] = {}
        self._closed = False
        self.connections_opened = 0
        """Connections opened so far (tests and benchmarks read it)."""

    async def aclose(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    async def request(
        self,
        method: str,
        url: str,
        *,
        endpoint: str,
        headers: Mapping[str, str] | None = None,
        params: Params | None = None,
        json_body: Any = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One request; raises httpx's transport errors as httpx would."""
        url = merge_query(url, params)
        if json_body is None:
            scheme, host, port, head = self._head(method, url, headers)
            body = b""
        else:
            scheme, host, port, head, body = self._prepare(method, url, headers, json_body)
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                status, reason, raw_headers, content = await self._exchange(
                    scheme, host, port, head, body
                )
        except TimeoutError:
            self._record(endpoint, method, "error", start, None)
            raise httpx.ReadTimeout(f"{method} {endpoint}: timed out") from None
        except httpx.TransportError:
            self._record(endpoint, method, "error", start, None)
            raise
        response = DirectResponse(status, raw_headers, content, reason, method, url)
        self._record(endpoint, method, status, start, response.headers)
        return response

    async def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Params | None = None,
        connect_timeout: float = 30.0,
        read_timeout: float | None = None,
    ) -> DirectStream:
        """A request whose body is read as it arrives (a watch), on a connection of its own
        that is closed with the stream. ``read_timeout`` bounds each silence (None: none)."""
        url = merge_query(url, params)
        scheme, host, port, head, _ = self._prepare(method, url, headers, None)
        try:
            async with asyncio.timeout(connect_timeout):
                conn = await self._connect(scheme, host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        try:
            async with asyncio.timeout(read_timeout):
                await conn.send(head, h11.EndOfMessage())
                response = await conn.response()
        except BaseException as err:
            conn.close()
            if isinstance(err, TimeoutError):
                raise httpx.ReadTimeout(f"{method}: no answer within {read_timeout}s") from None
            if isinstance(err, OSError):
                raise httpx.WriteError(f"sending the request failed: {err}") from None
            raise
        return DirectStream(conn, response.status_code, list(response.headers), read_timeout)

    def _head(self, method: str, url: str, headers: Mapping[str, str] | None) -> _Head:
        """A body-less request's (scheme, host, port, head), prepared once while it repeats.

        A listener sends the same long poll every 50 s, the only request most of its
        connections ever carry. Parsing its URL (``urlsplit``'s own cache holds 128, fewer
        than a controller's listeners) and validating its headers into an ``h11.Request``
        was a fifth of each poll's CPU. h11's events are immutable, so one serves every
        send; any change of URL or header (a refreshed token) is another key."""
        key = (method, url, tuple(headers.items()) if headers else ())
        prepared = self._heads.get(key)
        if prepared is None:
            scheme, host, port, head, _ = self._prepare(method, url, headers, None)
            prepared = (scheme, host, port, head)
            if len(self._heads) >= _HEADS_KEPT:
                del self._heads[next(iter(self._heads))]  # the oldest
            self._heads[key] = prepared
        return prepared

    def _prepare(
        self, method: str, url: str, headers: Mapping[str, str] | None, json_body: Any
    ) -> tuple[str, str, int, h11.Request, bytes]:
        """(scheme, host, port, the request's head, its body)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot send to {scheme or 'a relative'} URL")
        host = parts.hostname
        port = parts.port or (443 if scheme == "https" else 80)
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        fields = {"user-agent": ("User-Agent", self.user_agent), **_DEFAULT_FIELDS}
        if headers:
            for name, value in headers.items():
                fields[name.lower()] = (name, value)
        pairs = [("Host", parts.netloc.rpartition("@")[2]), *fields.values()]
        body = b""
        if json_body is not None:
            body = json.dumps(
                json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode()
            if "content-type" not in fields:
                pairs.append(("Content-Type", "application/json"))
        if body or method in ("POST", "PUT", "PATCH"):
            pairs.append(("Content-Length", str(len(body))))
        try:
            request = h11.Request(method=method, target=target, headers=pairs)
        except h11.LocalProtocolError as err:
            raise httpx.LocalProtocolError(f"invalid request: {err}") from None
        return scheme, host, port, request, body

    def _record(
        self,
        endpoint: str,
        method: str,
        status: int | str,
        start: float,
        headers: httpx.Headers | None,
    ) -> None:
        if self._observe is not None:
            self._observe(endpoint, method, status, time.perf_counter() - start, headers)

    async def _exchange(
        self, scheme: str, host: str, port: int, head: h11.Request, body: bytes
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        key = (scheme, host, port)
        if self._slots is not None:
            await self._slots.acquire()
        try:
            while True:
                conn, reused = self._idle_connection(key), True
                if conn is None:
                    conn, reused = await self._connect(scheme, host, port), False
                try:
                    response, content = await _roundtrip(conn, head, body, reused)
                except _Stale:
                    conn.close()
                    continue  # the server closed it while idle: a fresh one, once per stale
                except BaseException:
                    conn.close()  # cancelled or failed mid-exchange: never reuse it
                    raise
                if conn.reusable() and not self._closed:
                    self._release(key, conn)
                else:
                    conn.close()
                return response.status_code, response.reason, list(response.headers), content
        finally:
            if self._slots is not None:
                self._slots.release()

    def _idle_connection(self, key: tuple[str, str, int]) -> _Connection | None:
        conns = self._idle.get(key)
        while conns:
            conn = conns.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def _release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        conns = self._idle.setdefault(key, [])
        if len(conns) >= self.max_idle:
            conn.close()
        else:
            conns.append(conn)

    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        try:
            if scheme == "https":
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=self._ssl_context(),
                    server_hostname=self.server_hostname or host,
                    limit=_MAX_HEAD,
                )
            else:
                reader, writer = await asyncio.open_connection(host, port, limit=_MAX_HEAD)
        except ssl.SSLError as err:
            raise httpx.ConnectError(f"TLS handshake with {host}:{port} failed: {err}") from None
        except OSError as err:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {err}") from None
        self.connections_opened += 1
        return _Connection(reader, writer)


async def _roundtrip(
    conn: _Connection, head: h11.Request, body: bytes, reused: bool
) -> tuple[h11.Response, bytes]:
    """Send one request and read its whole answer. A reused connection that the server
    closed while it was idle raises :class:`_Stale` (no byte of an answer came back)."""
    events: list[h11.Event] = [head, h11.Data(data=body)] if body else [head]
    try:
        await conn.send(*events, h11.EndOfMessage())
    except OSError as err:
        if reused:
            raise _Stale from None
        raise httpx.WriteError(f"sending the request failed: {err}") from None
    try:
        response = await conn.response()
    except (httpx.RemoteProtocolError, httpx.ReadError):
        if reused and conn.received == 0:
            raise _Stale from None
        raise
    parts: list[bytes] = []
    while True:
        event = await conn.next_event()
        if isinstance(event, h11.Data):
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return response, b"".join(parts)
