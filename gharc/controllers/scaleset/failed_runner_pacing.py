"""The Failed-runner replace backoff of an EphemeralRunnerSet, kept on the object.

The set deletes its Failed runners so they are replaced, at a bounded rate (ARC #3729):
the n-th replacement in a row waits ``failed_runner_replace_backoff[n]`` after the one
before. Held in memory only, a controller restart (or a leader change) would reset the
ladder and let a runner that keeps failing through at the fastest rate again; so the step
and the time of the last replacement live in the set's status
(``failedRunnerReplacements``, ``lastFailedRunnerReplacementTime``), and the backoff is
reported as the ``FailedRunnerBackoff`` condition (True while a Failed runner is held
back), not only as events. The reconciler also keeps the last streak it wrote, so a cache
that has not seen that write yet cannot shorten the wait.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.controllers.scaleset import conditions as cond
from gharc.kube import objects

JSON = dict[str, Any]

#: Condition type on the EphemeralRunnerSet: True while a Failed runner waits for its
#: replacement.
FAILED_RUNNER_BACKOFF = "FailedRunnerBackoff"
REASON_BACKING_OFF = "BackingOff"
REASON_REPLACED = "Replaced"


@dataclass(frozen=True, slots=True)
class Streak:
    """Failed runners replaced in a row, and when the last one was (epoch seconds)."""

    count: int = 0
    last: float = float("-inf")

    def later(self, other: Streak | None) -> Streak:
        """The more recent of two records of the same streak."""
        return other if other is not None and other.last > self.last else self


def _epoch(value: Any) -> float:
    """Epoch seconds of a recorded time; an unreadable one is long ago (no wait)."""
    t = objects.parse_time(value)
    return float("-inf") if t is None else t.timestamp()


def read(ers: Mapping[str, Any]) -> Streak:
    """The streak the set's status records (none: a fresh ladder)."""
    status = objects.status_of(ers)
    when = status.get("lastFailedRunnerReplacementTime")
    if not when:
        return Streak()
    return Streak(objects.int_or(status.get("failedRunnerReplacements")), _epoch(when))


def _rfc3339(epoch: float) -> str:
    stamp = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status_patch(ers: Mapping[str, Any], streak: Streak, held: str | None) -> JSON | None:
    """The status patch recording ``streak`` and the condition (True with ``held`` as its
    message while a runner is held back); None when the status already says so."""
    status = objects.status_of(ers)
    conditions = status.get("conditions")
    if held is not None:
        wanted = cond.set_condition(
            conditions, FAILED_RUNNER_BACKOFF, cond.TRUE, REASON_BACKING_OFF, held
        )
    else:
        wanted = cond.set_condition(
            conditions,
            FAILED_RUNNER_BACKOFF,
            cond.FALSE,
            REASON_REPLACED,
            f"{streak.count} failed runner(s) replaced in a row; none held back",
        )
    patch: JSON = {}
    if wanted != list(conditions or ()):
        patch["conditions"] = wanted
    recorded = read(ers)
    if streak.last > float("-inf") and (
        recorded.count != streak.count or abs(recorded.last - streak.last) > 0.001
    ):
        patch["failedRunnerReplacements"] = streak.count
        patch["lastFailedRunnerReplacementTime"] = _rfc3339(streak.last)
    return {"status": patch} if patch else None
