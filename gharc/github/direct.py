"""HTTP/1.1 over asyncio streams for the Actions service client: the listener's hot path.

A listener makes about five Actions service calls per job (long poll, message delete,
acquire) when each message carries one job. Through ``httpx.AsyncClient`` each costs about
0.9 ms of CPU (URL parsing and validation per character, header normalisation, cookie
extraction, httpcore's state machine over anyio): 4-5 ms per job, most of a listener's CPU.
This client writes the request bytes itself and reads the answer from a kept-alive stream,
about 0.1 ms a call, and still hands back ``httpx.Response`` objects and raises httpx's
transport errors, so :class:`~gharc.github.transport.Sender`'s retries, breakers and error
mapping, and every caller, see no difference.

Deliberately small: one request at a time per connection, identity encoding (the request
says so), bodies by Content-Length, chunked or read to EOF. What it does not do (proxies,
an injected test transport, the REST client's HTTP cache) stays with httpx: the client that
owns this one only uses it when none of that applies.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

__all__ = ["DirectHTTP", "DirectResponse", "DirectStream", "merge_query"]

_MAX_HEAD = 64 * 1024
_NO_BODY = (204, 304)
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


_Body = int | None | str
"""How a streamed body ends: its length, ``"chunked"``, ``"none"``, or None (at EOF)."""


class DirectStream:
    """An answer whose body is read as it arrives; ``aclose()`` ends its connection. Its
    reading methods are named as ``httpx.Response``'s, so code written for a streamed httpx
    answer reads this one too."""

    def __init__(
        self,
        conn: _Connection,
        status: int,
        raw_headers: list[tuple[bytes, bytes]],
        body: _Body,
        read_timeout: float | None,
    ) -> None:
        self._conn = conn
        self.status_code = status
        self.headers = httpx.Headers(raw_headers)
        self._body = body
        self._read_timeout = read_timeout

    async def _timed(self, op: Awaitable[bytes]) -> bytes:
        async with asyncio.timeout(self._read_timeout):
            return await op

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises httpx's transport errors."""
        reader, body = self._conn.reader, self._body
        try:
            if body == "none":
                return
            if body == "chunked":
                while True:
                    line = await self._timed(reader.readuntil(b"\r\n"))
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise httpx.RemoteProtocolError("bad chunk size") from None
                    if size == 0:
                        return
                    data = await self._timed(reader.readexactly(size + 2))
                    if data[-2:] != b"\r\n":
                        raise httpx.RemoteProtocolError("chunk not followed by CRLF")
                    yield data[:-2]
            elif isinstance(body, int):
                remaining = body
                while remaining > 0:
                    data = await self._timed(reader.read(min(remaining, 65536)))
                    if not data:
                        raise httpx.RemoteProtocolError("the server closed the connection mid-body")
                    remaining -= len(data)
                    yield data
            else:
                while data := await self._timed(reader.read(65536)):
                    yield data
        except TimeoutError:
            raise httpx.ReadTimeout(f"no data for {self._read_timeout}s") from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise httpx.RemoteProtocolError("the server closed the connection mid-body") from None
        except OSError as err:
            raise httpx.ReadError(f"reading the response failed: {err}") from None

    async def aread(self) -> bytes:
        """The whole body, then the connection is closed."""
        try:
            return b"".join([chunk async for chunk in self.aiter_raw()])
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        self._conn.close()


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        """An idle connection the server has not closed (or written to) meanwhile."""
        return not self.writer.is_closing() and not self.reader.at_eof() and not _buffered(self)

    def close(self) -> None:
        self.writer.close()


def _buffered(conn: _Connection) -> bool:
    buffer = getattr(conn.reader, "_buffer", None)
    return bool(buffer)


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
        scheme, host, port, data = self._prepare(method, url, headers, json_body)
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                status, reason, raw_headers, content = await self._exchange(
                    scheme, host, port, data, method
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
        scheme, host, port, data = self._prepare(method, url, headers, None)
        try:
            async with asyncio.timeout(connect_timeout):
                conn = await self._connect(scheme, host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        try:
            async with asyncio.timeout(read_timeout):
                conn.writer.write(data)
                await conn.writer.drain()
                head = await conn.reader.readuntil(b"\r\n\r\n")
                status, _reason, raw_headers, length, chunked, _ = _parse_head(head)
                while 100 <= status < 200:
                    head = await conn.reader.readuntil(b"\r\n\r\n")
                    status, _reason, raw_headers, length, chunked, _ = _parse_head(head)
        except BaseException as err:
            conn.close()
            if isinstance(err, TimeoutError):
                raise httpx.ReadTimeout(f"{method}: no answer within {read_timeout}s") from None
            if isinstance(err, asyncio.IncompleteReadError | asyncio.LimitOverrunError):
                raise httpx.RemoteProtocolError("no answer to the request") from None
            if isinstance(err, OSError):
                raise httpx.ReadError(f"sending the request failed: {err}") from None
            raise
        body: _Body = "none" if method == "HEAD" or status in _NO_BODY else length
        if chunked and body != "none":
            body = "chunked"
        return DirectStream(conn, status, raw_headers, body, read_timeout)

    def _prepare(
        self, method: str, url: str, headers: Mapping[str, str] | None, json_body: Any
    ) -> tuple[str, str, int, bytes]:
        """(scheme, host, port, the request's bytes)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot send to {scheme or 'a relative'} URL")
        host = parts.hostname
        port = parts.port or (443 if scheme == "https" else 80)
        authority = parts.netloc.rpartition("@")[2]
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        body = b""
        fields = {"user-agent": ("User-Agent", self.user_agent), **_DEFAULT_FIELDS}
        if headers:
            for name, value in headers.items():
                if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                    raise httpx.LocalProtocolError(f"invalid header {name!r}")
                fields[name.lower()] = (name, value)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
        lines.extend(f"{name}: {value}" for name, value in fields.values())
        if json_body is not None:
            body = json.dumps(
                json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode()
            if "content-type" not in fields:
                lines.append("Content-Type: application/json")
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        return scheme, host, port, head + body

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
        self, scheme: str, host: str, port: int, data: bytes, method: str
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
                    status, reason, raw_headers, content, keep = await _roundtrip(
                        conn, data, method, reused
                    )
                except _Stale:
                    conn.close()
                    continue  # the server closed it while idle: a fresh one, once per stale
                except BaseException:
                    conn.close()  # cancelled or failed mid-exchange: never reuse it
                    raise
                if keep and not self._closed:
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


async def _roundtrip(
    conn: _Connection, data: bytes, method: str, reused: bool
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    """Write one request, read its answer; the last value says whether to keep the stream."""
    reader, writer = conn.reader, conn.writer
    try:
        writer.write(data)
        await writer.drain()
    except OSError as err:
        if reused:
            raise _Stale from None
        raise httpx.WriteError(f"sending the request failed: {err}") from None
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as err:
        if reused and not err.partial:
            raise _Stale from None
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.") from None
    except asyncio.LimitOverrunError:
        raise httpx.RemoteProtocolError("response head too large") from None
    except OSError as err:
        if reused:
            raise _Stale from None
        raise httpx.ReadError(f"reading the response failed: {err}") from None
    status, reason, raw_headers, length, chunked, close = _parse_head(head)
    while 100 <= status < 200:  # informational (100 Continue, 103 Early Hints): the answer follows
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            raise httpx.RemoteProtocolError("no final answer after an informational one") from None
        status, reason, raw_headers, length, chunked, close = _parse_head(head)
    try:
        if method == "HEAD" or status in _NO_BODY:
            content = b""
        elif chunked:
            content = await _read_chunked(reader)
        elif length is not None:
            content = await reader.readexactly(length)
        else:
            content = await reader.read()  # to EOF: the server closes to end it
            close = True
    except asyncio.IncompleteReadError:
        raise httpx.RemoteProtocolError("the server closed the connection mid-body") from None
    except asyncio.LimitOverrunError:
        raise httpx.RemoteProtocolError("malformed chunked body") from None
    except OSError as err:
        raise httpx.ReadError(f"reading the response failed: {err}") from None
    return status, reason, raw_headers, content, not close


def _parse_head(
    head: bytes,
) -> tuple[int, bytes, list[tuple[bytes, bytes]], int | None, bool, bool]:
    """Status, reason, headers, Content-Length, chunked?, connection close? of a head."""
    lines = head[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}")
    raw_headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    close = version == b"HTTP/1.0"
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        value = value.strip()
        raw_headers.append((name, value))
        lower = name.lower()
        if lower == b"content-length":
            if not value.isdigit():
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}")
            length = int(value)
        elif lower == b"transfer-encoding":
            chunked = value.lower().endswith(b"chunked")
        elif lower == b"connection":
            tokens = value.lower()
            if b"close" in tokens:
                close = True
            elif b"keep-alive" in tokens:
                close = False
    return int(code), reason, raw_headers, length, chunked, close


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailer fields: not used
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise httpx.RemoteProtocolError("chunk not followed by CRLF")
