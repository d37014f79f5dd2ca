"""Reading a delivery's body with bounded memory, disk and time.

Anyone who can reach the server can send a body; its signature can only be checked once the
last byte is in. So, until then, the body must cost little, and slow senders must not make
real deliveries wait:

* a body larger than ``limit`` (GitHub's 25 MB cap by default) is refused, from its
  ``Content-Length`` before any byte is read, or as soon as the count passes the limit;
* body bytes held in memory by all reads together stay under ``memory``; a body longer
  than ``spool``, or one that would pass ``memory``, continues in an anonymous temporary
  file;
* at most ``slots`` bodies are on disk at once (at most ``slots * limit`` bytes); a body
  that needs to spill waits for a slot. Real ``workflow_job`` payloads are a few KB: they
  stay in memory and never wait behind large or slow bodies;
* the whole read ends after ``timeout`` seconds (a connection that trickles its body is
  cut, never held open). The request head has the same deadline, through aiohttp's
  keep-alive timer (:mod:`gharc.webhook.app`).

The digest is computed as the chunks arrive, so nothing is read twice; a spilled body is
loaded back into memory only once its signature has been verified.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from aiohttp import web

from gharc.webhook.settings import WebhookSettings

MAX_BODY = WebhookSettings.max_body_bytes
SPOOL = 256 * 1024
MEMORY = 8 * 1024 * 1024
READ_TIMEOUT = WebhookSettings.read_timeout
SLOTS = WebhookSettings.max_concurrent_reads
CHUNK = 64 * 1024


class BodyError(Exception):
    """The body could not be read: ``status`` 408 too slow, 413 too large, 503 busy."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class BodyLimits:
    limit: int = MAX_BODY
    spool: int = SPOOL
    memory: int = MEMORY
    timeout: float = READ_TIMEOUT
    slots: int = SLOTS


class BodyReader:
    """Reads request bodies under :class:`BodyLimits`; one instance per server."""

    def __init__(self, limits: BodyLimits = BodyLimits()) -> None:
        self.limits = limits
        self._disk = asyncio.Semaphore(limits.slots)
        self.reading = 0  # bodies being read now
        self.spilled = 0  # of which on disk
        self.buffered = 0  # body bytes held in memory by all reads

    async def read(
        self,
        request: web.Request,
        on_chunk: Callable[[bytes], None],
        accept: Callable[[], None],
    ) -> bytes:
        """The body of ``request``: ``on_chunk`` sees every chunk as it arrives, then
        ``accept`` is called (it raises to refuse the body) before the body is loaded."""
        lim = self.limits
        declared = request.content_length
        if declared is not None and declared > lim.limit:
            raise BodyError(413, f"body of {declared} bytes exceeds the {lim.limit} byte limit")
        self.reading += 1
        try:
            async with asyncio.timeout(lim.timeout):
                return await self._read(request, on_chunk, accept)
        except TimeoutError:
            raise BodyError(408, f"body not received within {lim.timeout:g} s") from None
        finally:
            self.reading -= 1

    async def _read(
        self,
        request: web.Request,
        on_chunk: Callable[[bytes], None],
        accept: Callable[[], None],
    ) -> bytes:
        lim = self.limits
        size = held = 0
        parts: list[bytes] = []
        disk: IO[bytes] | None = None
        try:
            while chunk := await request.content.read(CHUNK):
                size += len(chunk)
                if size > lim.limit:
                    raise BodyError(413, f"body exceeds the {lim.limit} byte limit")
                on_chunk(chunk)
                if disk is None and (
                    held + len(chunk) > lim.spool or self.buffered + len(chunk) > lim.memory
                ):
                    disk = await self._spill()
                    disk.writelines(parts)
                    parts.clear()
                    self.buffered -= held
                    held = 0
                if disk is None:
                    parts.append(chunk)
                    held += len(chunk)
                    self.buffered += len(chunk)
                else:
                    disk.write(chunk)
            accept()
            if disk is None:
                return b"".join(parts)
            disk.seek(0)
            return disk.read()
        finally:
            self.buffered -= held
            if disk is not None:
                disk.close()
                self.spilled -= 1
                self._disk.release()

    async def _spill(self) -> IO[bytes]:
        """A disk slot and a temporary file (closed and released by the caller)."""
        await self._disk.acquire()
        try:
            disk = tempfile.TemporaryFile()  # noqa: SIM115 - the reader closes it
        except OSError as err:
            self._disk.release()
            raise BodyError(503, f"cannot spool a large body: {err}") from None
        self.spilled += 1
        return disk
