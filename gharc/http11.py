"""Kept-alive HTTP/1.1 over asyncio streams, parsed by httptools: the listener's hot path.

A listener makes about five Actions service calls per job (long poll, message delete,
acquire) when each message carries one job, and a listener pod also patches and watches
Kubernetes. Through ``httpx.AsyncClient`` each call costs about 0.9 ms of CPU (URL parsing
and validation per character, header normalisation, cookie extraction, httpcore over
anyio): 4-5 ms per job, most of a listener's CPU. Here httptools (llhttp, the parser of
Node.js, as uvicorn uses it) parses the answers, a request's head is written once and kept
while it repeats, and this module only moves bytes between them and an asyncio stream it
keeps alive. h11, the pure-Python state machine this module used before, took 60 us of
each call's 0.29 ms in a hot loop (and more on a cold CPU, as a controller's thousand
long polls run); llhttp takes 3. It still hands back ``httpx.Response`` objects and
raises httpx's transport errors, so the callers' retries, breakers and error mapping see
no difference.

Deliberately small: one request at a time per connection, identity encoding (the request
says so), no HEAD (an answer's length would then not be its body's). What it does not do
(proxies, an injected test transport, the REST client's HTTP cache) stays with httpx: the
clients that own this one use it only when none of that applies. It lives outside
gharc.kube and gharc.github because both use it.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import httptools
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


_Head = tuple[str, str, int, bytes]
"""A prepared request head: (scheme, host, port, the head's bytes)."""
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
"""A header name or method (RFC 9110 token)."""
_FIELD_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")
"""A header value: no control character but tab (no CR or LF, which would split it)."""
_TARGET = re.compile(r"[\x21-\x7e]+")
"""A request target: visible ASCII, no space."""
_NO_BODY_STATUS = (204, 304)


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

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises httpx's transport errors."""
        try:
            while True:
                async with asyncio.timeout(self._read_timeout):
                    chunk = await self._conn.next_chunk()
                if chunk is None:
                    return
                yield chunk
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
    """One stream and the llhttp parser of the answers that come back on it.

    The connection is the parser's callback target: what a callback learns is kept on it
    until the exchange's reader takes it. One parser serves every answer of the connection
    (llhttp resets between messages), so an informational answer (103 Early Hints) is
    simply a message whose head is dropped.
    """

    __slots__ = (
        "_body",
        "_done",
        "_eof_framed",
        "_extra",
        "_head_done",
        "_headers",
        "_keep_alive",
        "_parser",
        "_reason",
        "_status",
        "reader",
        "received",
        "writer",
    )

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._parser: Any = httptools.HttpResponseParser(self)
        self.received = 0
        """Bytes read for the current exchange: none means a reused stream went stale."""
        self._begin()

    def _begin(self) -> None:
        self._status = 0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_done = False
        self._done = False
        self._extra = False
        self._keep_alive = False
        self._eof_framed = False

    # -- llhttp's callbacks (only ever called from feed_data, inside _read) ---------------
    def on_message_begin(self) -> None:
        if self._done:
            self._extra = True  # bytes after the answer: nothing was asked for them

    def on_status(self, reason: bytes) -> None:
        if not self._done:
            self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._done:
            self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._done:
            return
        status = self._parser.get_status_code()
        if status < 200:
            self._reason, self._headers = b"", []  # informational: the final answer follows
            return
        self._status = status
        self._head_done = True
        self._keep_alive = self._parser.should_keep_alive()
        self._eof_framed = status not in _NO_BODY_STATUS and not any(
            n.lower() in (b"content-length", b"transfer-encoding") for n, _ in self._headers
        )

    def on_body(self, body: bytes) -> None:
        if not self._done:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._head_done:  # an informational answer's end is not the exchange's
            self._done = True

    # -- the exchange ---------------------------------------------------------------------
    def usable(self) -> bool:
        """An idle connection the server has not closed (or written to) meanwhile."""
        buffered = bool(getattr(self.reader, "_buffer", None))
        return not self.writer.is_closing() and not self.reader.at_eof() and not buffered

    def close(self) -> None:
        self._parser = None  # the parser refers back to this object: no cycle left behind
        self.writer.close()

    async def send(self, data: bytes) -> None:
        self._begin()
        self.received = 0
        self.writer.write(data)
        await self.writer.drain()

    async def _read(self) -> None:
        """Read what the server sent next and parse it; raises httpx's transport errors."""
        try:
            data = await self.reader.read(_READ_SIZE)
        except OSError as err:
            raise httpx.ReadError(f"reading the response failed: {err}") from None
        if self._parser is None:  # closed meanwhile (a watch stopped from another task)
            raise httpx.ReadError("the connection was closed")
        if not data:
            if self._head_done and self._eof_framed:
                self._done, self._keep_alive = True, False  # the body ran to the close
                return
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a complete response."
            )
        self.received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise httpx.RemoteProtocolError("the server switched protocols unasked") from None
        except httptools.HttpParserError as err:
            raise httpx.RemoteProtocolError(f"malformed response: {err}") from None
        if not self._head_done and self.received > _MAX_HEAD:
            raise httpx.RemoteProtocolError(f"response head larger than {_MAX_HEAD} bytes")

    async def response(self) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The final answer's status, reason and headers, past informational ones."""
        while not self._head_done:
            await self._read()
        return self._status, self._reason, self._headers

    async def next_chunk(self) -> bytes | None:
        """The body read so far and not yet taken, reading as needed; None at its end."""
        while not self._body:
            if self._done:
                return None
            await self._read()
        chunk = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        return chunk

    def reusable(self) -> bool:
        """The exchange ended cleanly and both sides keep the connection: ready for the next."""
        return self._done and self._keep_alive and not self._extra


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
                await conn.send(head)
                status, _, raw_headers = await conn.response()
        except BaseException as err:
            conn.close()
            if isinstance(err, TimeoutError):
                raise httpx.ReadTimeout(f"{method}: no answer within {read_timeout}s") from None
            if isinstance(err, OSError):
                raise httpx.WriteError(f"sending the request failed: {err}") from None
            raise
        return DirectStream(conn, status, raw_headers, read_timeout)

    def _head(self, method: str, url: str, headers: Mapping[str, str] | None) -> _Head:
        """A body-less request's (scheme, host, port, head), prepared once while it repeats.

        A listener sends the same long poll every 50 s, the only request most of its
        connections ever carry. Parsing its URL (``urlsplit``'s own cache holds 128, fewer
        than a controller's listeners) and validating and writing its headers was a fifth of
        each poll's CPU. The bytes serve every send; any change of URL or header (a
        refreshed token) is another key."""
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
    ) -> tuple[str, str, int, bytes, bytes]:
        """(scheme, host, port, the request's head, its body)."""
        if method == "HEAD" or not _TOKEN.fullmatch(method):
            raise httpx.LocalProtocolError(f"invalid request: method {method!r} is not sent here")
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
        return scheme, host, port, _head_bytes(method, target, pairs), body

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
        self, scheme: str, host: str, port: int, head: bytes, body: bytes
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
                    status, reason, raw_headers, content = await _roundtrip(
                        conn, head + body if body else head, reused
                    )
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
                return status, reason, raw_headers, content
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


def _head_bytes(method: str, target: str, pairs: list[tuple[str, str]]) -> bytes:
    """A request's head as sent; refuses what would be read as another request or header."""
    if not _TARGET.fullmatch(target):
        raise httpx.LocalProtocolError(f"invalid request: target {target!r}")
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in pairs:
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise httpx.LocalProtocolError(f"invalid request: header {name!r}")
        lines.append(f"{name}: {value}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    except UnicodeEncodeError:
        raise httpx.LocalProtocolError("invalid request: a header is not ASCII") from None


async def _roundtrip(
    conn: _Connection, request: bytes, reused: bool
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """Send one request and read its whole answer. A reused connection that the server
    closed while it was idle raises :class:`_Stale` (no byte of an answer came back)."""
    try:
        await conn.send(request)
    except OSError as err:
        if reused:
            raise _Stale from None
        raise httpx.WriteError(f"sending the request failed: {err}") from None
    try:
        status, reason, raw_headers = await conn.response()
    except (httpx.RemoteProtocolError, httpx.ReadError):
        if reused and conn.received == 0:
            raise _Stale from None
        raise
    parts: list[bytes] = []
    while (chunk := await conn.next_chunk()) is not None:
        parts.append(chunk)
    return status, reason, raw_headers, parts[0] if len(parts) == 1 else b"".join(parts)
