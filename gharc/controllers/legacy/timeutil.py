"""RFC 3339 times as Kubernetes writes them (``metav1.Time``: second precision, UTC ``Z``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gharc.api.legacy.duration import parse_go_duration as parse_go_duration  # re-export


def parse_time(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from an RFC 3339 string; None for None or ""."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def format_time(t: dt.datetime) -> str:
    """``metav1.Time`` form: ``2024-05-01T12:00:00Z`` (sub-second precision dropped)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_timestamp(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)
