"""Waiting for the world to reach a state: the one polling helper of tests and the demo.

Every wait in the tests goes through :func:`eventually`, so each has a timeout (a broken
controller fails the test instead of hanging it) and counts time on the event loop's clock:
under ``looptime`` a 300 s wait costs no real time, against a real API server it is real
time. Checks that something did *not* happen do not poll: they let loop time pass
(``looptime``) or wait for the event that would have caused it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]] | Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
    before_each: Callable[[], object] | None = None,
) -> T:
    """Call ``probe`` until it returns a truthy value and return that value.

    ``probe`` may be a plain function or a coroutine function: tests observe the API server
    from outside, as a user would, so they poll what they can read. ``before_each`` runs
    before every probe (e.g. to fail at once when the controller under test has died).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = None
    while True:
        if before_each is not None:
            before_each()
        last = probe()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"{message} not met within {timeout} s (last: {last!r})")
        await asyncio.sleep(interval)


async def consistently(
    probe: Callable[[], Awaitable[object]] | Callable[[], object],
    *,
    seconds: float,
    interval: float = 0.1,
    message: str = "condition",
) -> None:
    """Assert ``probe`` stays truthy for ``seconds`` of loop time, checking every
    ``interval``: for a real API server, where "the controller left it alone" can only be
    seen by watching for a while. Unit tests let loop time pass under ``looptime`` instead.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        result = probe()
        if inspect.isawaitable(result):
            result = await result
        assert result, f"{message} (after {seconds - (end - loop.time()):.1f} s)"
        await asyncio.sleep(interval)
