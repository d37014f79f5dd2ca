"""RFC 3339 times as Kubernetes writes them, shared by both API groups' schedules."""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["parse_time"]


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
