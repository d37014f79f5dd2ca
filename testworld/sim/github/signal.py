"""Wake-ups for long polls without polling loops.

A :class:`Signal` is fired by synchronous state changes (so tests can call the Python API
without awaiting) and awaited by handlers that hold a long poll open. Each ``fire`` swaps in
a fresh ``asyncio.Event``, so a waiter never misses a change made between its check and its
wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Signal:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_for(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """Return ``check()`` once it is not None, or None after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = self._event
            result = check()
            if result is not None:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return check()
