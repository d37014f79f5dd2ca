"""From a metric's suggestion to the replica count the HRA writes (legacy.md 3.4).

Capacity reservations (written by the webhook server) are added on top of the suggestion,
the sum is clamped to [minReplicas, maxReplicas], and a scale-down is held back for
``scaleDownDelaySecondsAfterScaleOut`` after the last scale out, so that a burst of
completions right after a burst of queued jobs does not flap the runner count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gharc.kube import objects


def _times(reservations: Sequence[Mapping[str, Any]], key: str) -> list[dt.datetime]:
    """Every reservation's ``key`` time that is set; a malformed one raises ``ValueError``."""
    return [t for t in (objects.parse_time(r.get(key), strict=True) for r in reservations) if t]


def reserved_replicas(reservations: Sequence[Mapping[str, Any]], now: dt.datetime) -> int:
    """Sum of ``replicas`` over the reservations that have not expired at ``now``."""
    total = 0
    for r in reservations:
        expiration = objects.parse_time(r.get("expirationTime"), strict=True)
        if expiration is not None and expiration > now:
            total += int(r.get("replicas") or 0)
    return total


def latest_effective_time(reservations: Sequence[Mapping[str, Any]]) -> dt.datetime | None:
    """The newest ``effectiveTime`` over *all* reservations, expired ones included (ARC)."""
    times = _times(reservations, "effectiveTime")
    return max(times) if times else None


def next_expiration(
    reservations: Sequence[Mapping[str, Any]], now: dt.datetime
) -> dt.datetime | None:
    """The soonest future expiration: the desired count drops then."""
    times = [t for t in _times(reservations, "expirationTime") if t > now]
    return min(times) if times else None


@dataclass(frozen=True)
class Decision:
    """The replica count, and when (if at all) the scale-down hold ends."""

    replicas: int
    held_until: dt.datetime | None = None


def decide_replicas(
    *,
    suggested: int | None,
    min_replicas: int,
    max_replicas: int | None,
    reservations: Sequence[Mapping[str, Any]],
    status_desired: int | None,
    last_scale_out: dt.datetime | None,
    scale_down_delay: dt.timedelta,
    now: dt.datetime,
) -> Decision:
    """ARC's ``computeReplicasWithCache`` after the metric: reserve, clamp, hold.

    The hold keeps the previous ``status.desiredReplicas`` even above ``maxReplicas`` (as
    ARC does): lowering maxReplicas takes effect once the delay has passed.
    """
    base = min_replicas if suggested is None else suggested
    desired = base + reserved_replicas(reservations, now)
    if desired < min_replicas:
        desired = min_replicas
    elif max_replicas is not None and desired > max_replicas:
        desired = max_replicas
    if status_desired is not None and status_desired >= desired and last_scale_out is not None:
        until = last_scale_out + scale_down_delay
        if until > now:
            return Decision(status_desired, until)
    return Decision(desired)
