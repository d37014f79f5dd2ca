"""RFC 3339 times as Kubernetes writes them (``metav1.Time``: second precision, UTC ``Z``)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any


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


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> dt.timedelta:
    """Go ``time.ParseDuration`` (``"1m"``, ``"1h30m"``, ``"90s"``); ValueError otherwise.

    ARC's duration flags (``--sync-period``, ``--default-scale-down-delay``) are Go
    durations, so ARC users' arguments must parse unchanged. (``gharc.webhook.lookup`` has
    the same parser for HRA trigger durations; the layering keeps webhook and controllers
    from importing each other.)
    """
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return dt.timedelta()
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"invalid duration {text!r}")
    return dt.timedelta(seconds=sign * total)
