"""An in-memory storage backend for hishel 2.0's RFC 9111 cache transport.

hishel ships SQLite and Redis storages; the controller wants neither a file nor a server for
a cache of a few hundred small JSON bodies, so this implements hishel's ``AsyncBaseStorage``
contract in a dict. The caching *decisions* (freshness, ETag revalidation, Vary) stay
hishel's; see :func:`cached_transport`.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
from hishel import AsyncBaseStorage, CacheOptions, Entry, Headers, Request, Response
from hishel.httpx import AsyncCacheTransport


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    yield body


@dataclass
class _Stored:
    id: uuid.UUID
    key: str
    request: Request
    status: int
    headers: Headers
    body: bytes
    ttl_deadline: float | None
    tti: float | None
    last_access: float


class MemoryStorage(AsyncBaseStorage):
    """Entries in insertion/LRU order, bounded by ``max_entries``."""

    def __init__(
        self,
        *,
        max_entries: int = 2048,
        default_ttl: float | None = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(default_ttl=default_ttl)
        self._max = max_entries
        self._clock = clock
        self._by_id: OrderedDict[uuid.UUID, _Stored] = OrderedDict()

    def size(self) -> int:
        """Entries held (not ``__len__``: hishel tests the storage for truthiness)."""
        return len(self._by_id)

    async def create_entry(
        self,
        request: Request,
        response: Response,
        key: str,
        *,
        ttl: float | None = None,
        tti: float | None = None,
    ) -> Entry:
        body = b""
        stream = response.stream
        if stream is not None:
            if hasattr(stream, "__aiter__"):
                body = b"".join([chunk async for chunk in stream])
            else:
                body = b"".join(stream)
        now = self._clock()
        ttl_deadline, tti = self._limits(ttl, tti, now)
        stored = _Stored(
            uuid.uuid4(),
            key,
            request,
            response.status_code,
            response.headers,
            body,
            ttl_deadline,
            tti,
            now,
        )
        # A full response supersedes what is stored for the same request: hishel revalidates
        # with the entry whose Date is latest, and Dates of one second tie, so a superseded
        # entry's ETag would be sent and every later revalidation would get a 200, not a 304.
        for sid, old in list(self._by_id.items()):
            if (
                old.key == key
                and old.request.method == request.method
                and str(old.request.url) == str(request.url)
            ):
                del self._by_id[sid]
        self._by_id[stored.id] = stored
        while len(self._by_id) > self._max:
            self._by_id.popitem(last=False)
        return self._entry(stored)

    def _entry(self, stored: _Stored) -> Entry:
        return Entry(
            id=stored.id,
            request=stored.request,
            response=Response(
                status_code=stored.status, headers=stored.headers, stream=_chunks(stored.body)
            ),
        )

    async def get_entries(self, key: str) -> list[Entry]:
        now = self._clock()
        out = []
        for sid, stored in list(self._by_id.items()):
            if stored.key != key:
                continue
            expires = self._expires_at(stored.ttl_deadline, stored.tti, stored.last_access)
            if expires is not None and expires <= now:
                del self._by_id[sid]
                continue
            stored.last_access = now
            self._by_id.move_to_end(sid)
            out.append(self._entry(stored))
        return out

    async def update_headers(self, id: uuid.UUID, headers: Headers) -> None:
        stored = self._by_id.get(id)
        if stored is not None:
            stored.headers = headers

    async def remove_entry(self, id: uuid.UUID) -> None:
        self._by_id.pop(id, None)


def cached_transport(
    inner: httpx.AsyncBaseTransport, storage: AsyncBaseStorage
) -> httpx.AsyncBaseTransport:
    """RFC 9111 caching as a *private* cache: GitHub marks REST responses ``private``, and a
    cache is only ever shared between clients of one credential (the key says which)."""
    return AsyncCacheTransport(inner, storage=storage, rfc=CacheOptions(shared=False))
