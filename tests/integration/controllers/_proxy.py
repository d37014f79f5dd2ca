"""A tiny HTTP forward proxy on 127.0.0.1 that counts what goes through it.

Plain HTTP only (absolute-form requests, no CONNECT): the fake GitHub speaks HTTP, which is
enough to prove a client uses the proxy it was given rather than connecting directly.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

_HOP_BY_HOP = {"host", "proxy-authorization", "proxy-connection", "connection", "keep-alive"}


@dataclass
class ForwardProxy:
    url: str = ""
    requests: list[str] = field(default_factory=list)
    refused: int = 0
    credentials: tuple[str, str] | None = None


@contextlib.asynccontextmanager
async def forward_proxy(credentials: tuple[str, str] | None = None) -> AsyncIterator[ForwardProxy]:
    """Run the proxy; with ``credentials`` it answers 407 to requests without them."""
    state = ForwardProxy(credentials=credentials)
    expected = (
        "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        if credentials
        else None
    )
    session = aiohttp.ClientSession(auto_decompress=False)

    async def handle(request: web.Request) -> web.StreamResponse:
        if expected is not None and request.headers.get("Proxy-Authorization") != expected:
            state.refused += 1
            return web.Response(status=407, headers={"Proxy-Authenticate": "Basic"})
        state.requests.append(f"{request.method} {request.url}")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with session.request(
            request.method, str(request.url), headers=headers, data=await request.read()
        ) as upstream:
            body = await upstream.read()
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            out.pop("Content-Length", None)
            out.pop("Transfer-Encoding", None)
            return web.Response(status=upstream.status, body=body, headers=out)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield state
    finally:
        await runner.cleanup()
        await session.close()
