"""Waiting for the world to reach a state, for tests and the demo."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> T:
    """Call ``probe`` until it returns a truthy value and return that value.

    Tests observe the API server from outside, as a user would, so they poll; the interval
    is small and the timeout bounds every wait so a broken controller fails the test
    instead of hanging it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"{message} not met within {timeout} s (last: {last!r})")
        await asyncio.sleep(interval)
