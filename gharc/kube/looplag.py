"""Event-loop lag: how long one piece of work held the loop every tenant shares, and whose.

A timer that fires late says the loop was held; the lateness is the hold. The monitor
sleeps ``interval`` seconds at a time on the loop and observes each wake-up's lateness in
``gharc_event_loop_lag_seconds``. Which work held it cannot be asked on the loop (nothing
runs there while it is held), so a small watchdog thread looks while it is held: the task
the loop is running then is named after its work (``reconcile:<controller>:<ns>/<name>``,
``listener:<ns>/<name>``), and the longest hold's name is kept, logged once the loop runs
again, and handed to ``on_stall`` (the controller turns it into an event on that object).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gharc.kube import metrics

__all__ = ["LoopLagMonitor", "Stall"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Stall:
    """One hold of the loop longer than the monitor's ``threshold``."""

    seconds: float
    work: str
    """The running task's name while the loop was held ("" when none was seen)."""


class LoopLagMonitor:
    """Measures the running loop's lag until cancelled (see the module docstring)."""

    def __init__(
        self,
        *,
        interval: float = 0.25,
        threshold: float = 1.0,
        on_stall: Callable[[Stall], None] | None = None,
    ) -> None:
        self.interval = interval
        self.threshold = threshold
        self.on_stall = on_stall
        self.longest: Stall | None = None
        """The longest hold seen so far."""
        self._beat = time.monotonic()
        self._holder = ""
        self._stop = threading.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        watchdog = threading.Thread(
            target=self._watch, args=(loop,), name="event-loop-watchdog", daemon=True
        )
        watchdog.start()
        try:
            while True:
                self._beat = time.monotonic()
                self._holder = ""
                await asyncio.sleep(self.interval)
                lag = max(0.0, time.monotonic() - self._beat - self.interval)
                metrics.EVENT_LOOP_LAG.observe(lag)
                if lag >= self.threshold:
                    self._report(Stall(lag, self._holder))
        finally:
            self._stop.set()

    def _report(self, stall: Stall) -> None:
        if self.longest is None or stall.seconds > self.longest.seconds:
            self.longest = stall
        log.warning(
            "the event loop was held for %.1f s by %s",
            stall.seconds,
            stall.work or "work that could not be named",
        )
        if self.on_stall is not None:
            try:
                self.on_stall(stall)
            except Exception:
                log.exception("reporting a held event loop failed")

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Names the task the loop runs once it has not woken the monitor for a while."""
        check = min(self.threshold / 2, 0.25)
        while not self._stop.wait(check):
            if time.monotonic() - self._beat < self.interval + check or self._holder:
                continue
            task = asyncio.current_task(loop)
            if task is not None:
                self._holder = task.get_name()
