"""gharc.http11: the HTTP/1.1 sender of the Actions service client and the listener pod.

Each test runs a scripted server on 127.0.0.1 that records what it reads and answers with
raw bytes, so framing (Content-Length, chunked, to EOF), connection reuse and failures are
pinned exactly; the Actions client's own tests run it against the fake GitHub.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gharc.github.actions import ActionsClient, _queue_url
from gharc.github.auth import PersonalAccessToken
from gharc.github.config import parse_config_url
from gharc.github.metrics import GitHubMetrics
from gharc.github.transport import ENV_HTTPX_ONLY, ssl_context
from gharc.http11 import DirectHTTP, merge_query

Answer = Callable[[bytes], bytes | None]
"""Given the request head and body, the raw answer (None: close without answering)."""
HOLD = b"hold"
"""An answer that is never sent: the server keeps the connection open and silent."""


class Server:
    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                answer = self.answers.pop(0)(request)
                if answer is None:
                    break
                if answer == HOLD:
                    await reader.read()  # never answers; ends when the client gives up
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[list[Answer]], Any]]:
    servers: list[Server] = []

    async def start(answers: list[Answer]) -> Server:
        s = Server(answers)
        s.server = await asyncio.start_server(s.handle, "127.0.0.1", 0)
        servers.append(s)
        return s

    yield start
    for s in servers:
        assert s.server is not None
        s.server.close()


def ok(body: bytes = b'{"ok":true}', extra: bytes = b"") -> Answer:
    return lambda _req: (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def client(**kw: Any) -> DirectHTTP:
    return DirectHTTP(user_agent="gharc-test", ssl_context=lambda: ssl_context(None), **kw)


async def test_keeps_the_connection_alive_and_sends_what_it_is_given(serve: Any) -> None:
    server = await serve([ok(), ok(b"[1,2]")])
    http = client()
    first = await http.request(
        "POST",
        f"{server.url}/q?sessionId=a%2Bb",
        endpoint="/q",
        headers={"Authorization": "Bearer t", "Accept": "application/json; api-version=6.0"},
        params={"lastMessageId": 7},
        json_body=[1, 2],
    )
    second = await http.request("GET", f"{server.url}/r", endpoint="/r")
    assert first.json() == {"ok": True} and second.json() == [1, 2]
    assert server.connections == 1 and http.connections_opened == 1
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /q?sessionId=a%2Bb&lastMessageId=7 HTTP/1.1"
    assert b"Authorization: Bearer t" in lines
    assert b"Accept: application/json; api-version=6.0" in lines  # replaces the default
    assert sum(line.lower().startswith(b"accept:") for line in lines) == 1
    assert b"User-Agent: gharc-test" in lines and b"Content-Type: application/json" in lines
    assert json.loads(body) == [1, 2]
    assert first.request.url == httpx.URL(f"{server.url}/q?sessionId=a%2Bb&lastMessageId=7")
    await http.aclose()


async def test_a_repeated_request_is_prepared_once_and_a_changed_one_again(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await serve([ok() for _ in range(4 + 10)])
    http = client()
    prepared: list[str] = []
    real = DirectHTTP._prepare

    def counting(self: DirectHTTP, method: str, url: str, *args: Any) -> Any:
        prepared.append(url)
        return real(self, method, url, *args)

    monkeypatch.setattr(DirectHTTP, "_prepare", counting)
    poll = f"{server.url}/messages?sessionId=s"
    for token in ("a", "a", "a", "b"):  # a refreshed token must reach the server
        await http.request(
            "GET",
            poll,
            endpoint="/m",
            headers={"Authorization": f"Bearer {token}"},
            params={"lastMessageId": 3},
        )
    assert len(prepared) == 2
    sent = [r.split(b"\r\n") for r in server.requests]
    assert [next(line for line in r if line.startswith(b"Authorization")) for r in sent] == [
        b"Authorization: Bearer a",
        b"Authorization: Bearer a",
        b"Authorization: Bearer a",
        b"Authorization: Bearer b",
    ]
    assert all(r[0] == b"GET /messages?sessionId=s&lastMessageId=3 HTTP/1.1" for r in sent)
    for n in range(10):  # distinct requests: the memo stays bounded
        await http.request("GET", f"{server.url}/r{n}", endpoint="/r")
    assert len(http._heads) <= 8
    await http.aclose()


async def test_reads_chunked_and_to_eof_bodies(serve: Any) -> None:
    chunked: Answer = lambda _r: (  # noqa: E731
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"a"\r\n5\r\n: 1}\n\r\n0\r\nX-Trailer: y\r\n\r\n'
    )
    to_eof: Answer = lambda _r: (  # noqa: E731 - an informational answer first
        b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
        b"HTTP/1.1 202 Accepted\r\nConnection: close\r\n\r\nlate"
    )
    server = await serve([chunked, to_eof, ok()])
    http = client()
    assert (await http.request("GET", f"{server.url}/c", endpoint="/c")).json() == {"a": 1}
    eof = await http.request("GET", f"{server.url}/e", endpoint="/e")
    assert (eof.status_code, eof.content, eof.reason_phrase) == (202, b"late", "Accepted")
    assert (await http.request("GET", f"{server.url}/n", endpoint="/n")).status_code == 200
    assert server.connections == 2  # the body read to EOF ended its connection
    await http.aclose()


async def test_bodies_larger_than_the_stream_buffer(serve: Any) -> None:
    big = json.dumps({"value": ["x" * 100] * 20000}).encode()  # about 2 MiB
    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    chunked: Answer = lambda _r: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk  # noqa: E731
    server = await serve([ok(big), chunked])
    http = client()
    assert (await http.request("GET", f"{server.url}/a", endpoint="/a")).content == big
    assert (await http.request("GET", f"{server.url}/b", endpoint="/b")).content == big
    await http.aclose()


async def test_a_connection_the_server_closed_while_idle_is_replaced(serve: Any) -> None:
    server = await serve([ok(), lambda _r: None, ok(b'{"again":1}')])
    http = client()
    await http.request("GET", f"{server.url}/a", endpoint="/a")
    # The server drops the kept-alive connection as the next request arrives on it.
    answer = await http.request("GET", f"{server.url}/b", endpoint="/b")
    assert answer.json() == {"again": 1}
    assert http.connections_opened == 2
    await http.aclose()


async def test_failures_are_httpx_transport_errors(serve: Any) -> None:
    server = await serve([lambda _r: None, lambda _r: HOLD])
    http = client()
    with pytest.raises(httpx.RemoteProtocolError):  # a fresh connection closed: no retry
        await http.request("GET", f"{server.url}/x", endpoint="/x")
    with pytest.raises(httpx.ReadTimeout):
        await http.request("GET", f"{server.url}/y", endpoint="/y", timeout=0.2)
    await http.aclose()
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    with pytest.raises(httpx.ConnectError):
        await client().request("GET", f"http://127.0.0.1:{port}/", endpoint="/")


async def test_a_cancelled_request_never_returns_its_connection(serve: Any) -> None:
    server = await serve([lambda _r: HOLD, ok()])
    http = client()
    poll = asyncio.ensure_future(http.request("GET", f"{server.url}/p", endpoint="/p"))
    await asyncio.sleep(0.2)  # the request is on the wire, its answer never comes
    assert server.requests
    poll.cancel()
    with pytest.raises(asyncio.CancelledError):
        await poll
    assert (await http.request("GET", f"{server.url}/q", endpoint="/q")).status_code == 200
    assert http.connections_opened == 2
    await http.aclose()


async def test_metrics_see_each_request(serve: Any) -> None:
    server = await serve([ok(extra=b"X-RateLimit-Remaining: 4999\r\n")])
    seen: list[tuple[str, str, int | str]] = []
    http = client(observe=lambda e, m, s, _sec, _h: seen.append((e, m, s)))
    await http.request("DELETE", f"{server.url}/m/1", endpoint="/m/{id}")
    assert seen == [("/m/{id}", "DELETE", 200)]
    await http.aclose()


def test_query_merge_and_queue_urls_keep_the_queue_query_as_written() -> None:
    url = "https://q.example/broker/s/messages?sessionId=a%2Bb&tenant=7"
    assert merge_query(url, {"lastMessageId": 3}) == f"{url}&lastMessageId=3"
    assert merge_query(url, {"tenant": 8}) == url.replace("tenant=7", "tenant=8")
    assert merge_query("http://h/p", {"a b": "c/d", "t": True}) == "http://h/p?a%20b=c%2Fd&t=true"
    assert merge_query(url, None) == url
    assert (
        _queue_url(url, "42") == "https://q.example/broker/s/messages/42?sessionId=a%2Bb&tenant=7"
    )
    assert _queue_url("http://h/m/", "1") == "http://h/m/1"


def test_the_actions_client_sends_directly_unless_httpx_must(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def direct(**kw: Any) -> bool:
        c = ActionsClient(
            parse_config_url("https://github.com/org"),
            PersonalAccessToken("t"),
            metrics=GitHubMetrics(CollectorRegistry()),
            **kw,
        )
        return c._direct is not None

    for var in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(ENV_HTTPX_ONLY, raising=False)
    assert direct()
    assert not direct(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    monkeypatch.setenv(ENV_HTTPX_ONLY, "1")
    assert not direct()
    monkeypatch.delenv(ENV_HTTPX_ONLY)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert not direct()


async def test_tls_with_a_private_ca(tmp_path: Any) -> None:
    """GHES behind a private CA: the server's certificate is checked against the bundle, and
    the host name against the certificate."""
    import ssl

    from testworld.certs import TinyCA

    ca = TinyCA()
    leaf = ca.issue("localhost", dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True)
    pem = ca.cert_pem.decode()
    (tmp_path / "cert.pem").write_bytes(leaf.cert_pem)
    (tmp_path / "key.pem").write_bytes(leaf.key_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    s = Server([ok(b'{"tls":1}'), ok(b'{"tls":2}')])
    s.server = await asyncio.start_server(s.handle, "127.0.0.1", 0, ssl=server_ctx)
    port = s.server.sockets[0].getsockname()[1]
    http = DirectHTTP(user_agent="t", ssl_context=lambda: ssl_context(pem))
    try:
        first = await http.request("GET", f"https://localhost:{port}/a", endpoint="/a")
        second = await http.request("GET", f"https://127.0.0.1:{port}/b", endpoint="/b")
        assert (first.json(), second.json()) == ({"tls": 1}, {"tls": 2})
        with pytest.raises(httpx.ConnectError):  # the system store does not trust it
            await client().request("GET", f"https://localhost:{port}/c", endpoint="/c")
    finally:
        await http.aclose()
        s.server.close()


async def test_a_stream_reads_as_data_arrives_and_times_out_on_silence(serve: Any) -> None:
    sized: Answer = lambda _r: b"HTTP/1.1 410 Gone\r\nContent-Length: 7\r\n\r\nexpired"  # noqa: E731
    head: Answer = lambda _r: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # noqa: E731
    server = await serve([sized, head, lambda _r: HOLD])  # the last keeps the stream open
    http = client()
    gone = await http.stream("GET", f"{server.url}/w", params={"watch": True})
    assert (gone.status_code, await gone.aread()) == (410, b"expired")
    silent = await http.stream("GET", f"{server.url}/w", read_timeout=0.2)
    assert silent.status_code == 200
    with pytest.raises(httpx.ReadTimeout):  # the head came, then nothing
        async for _ in silent.aiter_raw():
            pass
    await silent.aclose()
    assert server.requests[0].startswith(b"GET /w?watch=true HTTP/1.1")
    await http.aclose()


async def test_a_header_that_would_split_the_request_is_never_sent(serve: Any) -> None:
    server = await serve([ok()])
    http = client()
    for bad in ({"Authorization": "Bearer t\r\nX-Evil: 1"}, {"Bad Name": "v"}, {"X": "caf\u00e9"}):
        with pytest.raises(httpx.LocalProtocolError, match="invalid request"):
            await http.request("GET", f"{server.url}/a", endpoint="/a", headers=bad)
    with pytest.raises(httpx.LocalProtocolError, match="invalid request"):
        await http.request("HEAD", f"{server.url}/a", endpoint="/a")
    assert server.requests == []
    assert (await http.request("GET", f"{server.url}/a", endpoint="/a")).status_code == 200
    await http.aclose()


async def test_a_malformed_or_overlong_answer_is_a_protocol_error(serve: Any) -> None:
    garbage: Answer = lambda _r: b"HTTP/1.1 abc Nope\r\n\r\n"  # noqa: E731
    huge: Answer = lambda _r: b"HTTP/1.1 200 OK\r\nX-Pad: " + b"x" * (70 * 1024)  # noqa: E731
    server = await serve([garbage, huge])
    http = client()
    with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
        await http.request("GET", f"{server.url}/a", endpoint="/a")
    with pytest.raises(httpx.RemoteProtocolError, match="head larger"):
        await http.request("GET", f"{server.url}/b", endpoint="/b")
    await http.aclose()


async def test_bytes_after_the_answer_keep_the_connection_from_reuse(serve: Any) -> None:
    doubled: Answer = lambda r: ok()(r) + ok(b'{"unasked":1}')(r)  # noqa: E731
    server = await serve([doubled, ok(b'{"second":1}')])
    http = client()
    assert (await http.request("GET", f"{server.url}/a", endpoint="/a")).json() == {"ok": True}
    second = await http.request("GET", f"{server.url}/b", endpoint="/b")
    assert second.json() == {"second": 1}  # not the unasked answer left on the first connection
    assert http.connections_opened == 2
    await http.aclose()


async def test_answers_without_a_body_by_status_end_at_their_head(serve: Any) -> None:
    no_content: Answer = lambda _r: b"HTTP/1.1 204 No Content\r\n\r\n"  # noqa: E731
    server = await serve([no_content, ok()])
    http = client()
    answer = await http.request("DELETE", f"{server.url}/m/1", endpoint="/m/{id}", timeout=2)
    assert (answer.status_code, answer.content) == (204, b"")
    assert (await http.request("GET", f"{server.url}/n", endpoint="/n")).status_code == 200
    assert http.connections_opened == 1
    await http.aclose()


async def test_a_stream_closed_from_another_task_ends_with_a_transport_error(serve: Any) -> None:
    head: Answer = lambda _r: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # noqa: E731
    server = await serve([head, lambda _r: HOLD])
    http = client()
    watch = await http.stream("GET", f"{server.url}/w", read_timeout=5)

    async def read_all() -> list[bytes]:
        return [chunk async for chunk in watch.aiter_raw()]

    reader = asyncio.ensure_future(read_all())
    await asyncio.sleep(0.1)  # the reader waits for the next chunk
    await watch.aclose()
    with pytest.raises(httpx.TransportError):
        await asyncio.wait_for(reader, 2)
    await http.aclose()
