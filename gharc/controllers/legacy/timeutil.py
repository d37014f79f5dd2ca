"""RFC 3339 times as Kubernetes writes them (``metav1.Time``: second precision, UTC ``Z``)."""

from __future__ import annotations

import datetime as dt

from gharc.api.legacy.duration import parse_go_duration as parse_go_duration  # re-export
from gharc.api.times import parse_time as parse_time  # re-export


def format_time(t: dt.datetime) -> str:
    """``metav1.Time`` form: ``2024-05-01T12:00:00Z`` (sub-second precision dropped)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_timestamp(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)
