"""Go ``time.ParseDuration`` strings, the format of ARC's duration fields and flags.

HRA fields (``scaleUpTriggers[].duration``) and controller flags (``--sync-period``) carry
Go durations, so ARC users' values must parse unchanged. It lives with the API's value
formats so both the controllers and the webhook server use the one parser.
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["parse_go_duration"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> dt.timedelta:
    """Go ``time.ParseDuration`` (``"30m"``, ``"1h30m"``, ``"90s"``); ValueError otherwise."""
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
