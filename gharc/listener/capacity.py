"""What gharc adds to ARC's desired count: scheduled minimums and a burst buffer.

ARC's target is ``min(minRunners + assigned jobs, maxRunners)``. Users asked for two more
terms (user-needs.md G25, G26), both opt-in and both evaluated here, in the listener, from
absolute time, so a restarted listener (or a standby that took over) replays them exactly:

* **scheduled minimums** (``scheduledOverrides``, the legacy HRA's shape with ``minRunners``
  and an optional ``timeZone``): during a window the minimum is the override's, e.g. five
  warm runners on weekday mornings in Berlin, none at night;
* **a burst buffer** (``burst.runners``, ``burst.decaySeconds``): while jobs are arriving,
  that many extra idle runners are kept ready, so the next job of a wave does not wait for
  a pod to start; after the last arrival the extra count falls linearly to zero over the
  decay time.

:class:`CapacityPolicy` is pure: it takes the time as an argument, and says when its answer
next changes so the listener can publish at that moment instead of at the next message.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CapacityPolicy"]

# gharc.api.schedule (with zoneinfo and dateutil's rrule: 0.7 MiB of RSS) is imported only
# by a policy that has scheduled overrides; most listener pods have none.


class CapacityPolicy:
    """The minimum and the extra runners at a given time."""

    def __init__(
        self,
        min_runners: int,
        overrides: Sequence[Mapping[str, Any]] = (),
        *,
        burst_runners: int = 0,
        burst_decay_seconds: float = 300.0,
    ) -> None:
        self.base_min = min_runners
        self.overrides = list(overrides)
        self.burst_runners = max(0, burst_runners)
        self.burst_decay_seconds = max(1.0, burst_decay_seconds)
        self.last_demand: float | None = None
        if self.overrides:
            from gharc.api.schedule import match_overrides

            match_overrides(dt.datetime.now(dt.UTC), self.overrides, key="minRunners")

    @property
    def active(self) -> bool:
        return bool(self.overrides) or self.burst_runners > 0

    def min_runners(self, now: dt.datetime) -> int:
        """The minimum now: the active override's, else the configured one."""
        if not self.overrides:
            return self.base_min
        from gharc.api.schedule import match_overrides

        override, _active, _upcoming = match_overrides(now, self.overrides, key="minRunners")
        return self.base_min if override is None else override

    def note_demand(self, mono: float) -> None:
        """Jobs arrived (available or newly assigned) at monotonic time ``mono``."""
        self.last_demand = mono

    def extra(self, mono: float) -> int:
        """Extra idle runners now: ``burst.runners`` decaying to 0 after the last arrival."""
        if not self.burst_runners or self.last_demand is None:
            return 0
        left = 1.0 - (mono - self.last_demand) / self.burst_decay_seconds
        return max(0, math.ceil(self.burst_runners * left)) if left > 0 else 0

    def next_change(self, now: dt.datetime, mono: float) -> float | None:
        """Seconds until :meth:`min_runners` or :meth:`extra` changes, or None (never)."""
        waits: list[float] = []
        if self.overrides:
            from gharc.api.schedule import match_overrides, next_boundary

            _override, active, upcoming = match_overrides(now, self.overrides, key="minRunners")
            boundary = next_boundary(active, upcoming)
            if boundary is not None:
                waits.append(max(0.0, (boundary - now).total_seconds()))
        current = self.extra(mono)
        if current > 0 and self.last_demand is not None:
            # extra() drops by one each decay/runners seconds: wake at the next step.
            step = self.burst_decay_seconds / self.burst_runners
            elapsed = mono - self.last_demand
            waits.append(max(0.0, step * (math.floor(elapsed / step) + 1) - elapsed))
        return min(waits) if waits else None
