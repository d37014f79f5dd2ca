"""Scheduled overrides of a minimum: an HRA's minReplicas (legacy.md 3.5, ARC
``schedule.go``) and, in gharc, an AutoscalingRunnerSet's minRunners.

Occurrences come from an RFC 5545 rule (``dateutil.rrule``: FREQ, DTSTART=startTime,
UNTIL=untilTime), exactly as ARC builds one with rrule-go, so a Monthly override that
starts on the 31st skips short months the same way in both.

gharc adds ``timeZone`` (an IANA name) to an override: its times without an offset are
wall-clock times there, and a recurring window keeps its wall-clock hours across daylight
saving changes ("08:00 in Berlin" stays 08:00 in summer), which fixed offsets cannot say.

A rule is never walked from its ``startTime``: an override that started in the year 1000
would cost seconds of CPU per evaluation on the controller's shared event loop (a tenant's
schedule must not stall every other tenant's). :func:`_recent_start` moves the rule's start
to one of its own occurrences shortly before ``now`` by calendar arithmetic, so an
evaluation costs the same whatever the age of ``startTime``.

Everything takes ``now`` as an argument: the reconciler passes its clock's time, and the
tests pass any instant they like instead of sleeping until a schedule starts.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import rrule

from gharc.kube import objects

_FREQ = {
    "Daily": (rrule.DAILY, 0, 0, 1),
    "Weekly": (rrule.WEEKLY, 0, 0, 7),
    "Monthly": (rrule.MONTHLY, 0, 1, 0),
    "Yearly": (rrule.YEARLY, 1, 0, 0),
}
_TICK = dt.timedelta(microseconds=1)  # Go's +1ns, at Python's resolution


class ScheduleError(ValueError):
    """An override that cannot be evaluated (bad frequency, too long for its frequency)."""


@dataclass(frozen=True)
class Period:
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class Override:
    """One matched override: its period and the minReplicas it sets (None: unchanged)."""

    period: Period
    min_replicas: int | None


def _go_date_add(now: dt.datetime, years: int, months: int, days: int) -> dt.datetime:
    """``time.Date(y+years, m+months, d+days, ...)``: Go normalises overflow (Jan 31 + 1
    month is Mar 3, not Feb 28 as relativedelta would say), and ARC's frequency length
    comes from that arithmetic."""
    month_index = now.month - 1 + months
    year = now.year + years + month_index // 12
    month = month_index % 12 + 1
    first = now.replace(year=year, month=month, day=1)
    return first + dt.timedelta(days=now.day - 1 + days)


def _date_exists(year: int, month: int, day: int) -> bool:
    return 1 <= year <= dt.MAXYEAR and day <= calendar.monthrange(year, month)[1]


def _recent_start(start: dt.datetime, frequency: str, before: dt.datetime) -> dt.datetime:
    """An occurrence of the rule that starts at ``start`` (one repeat per ``frequency``),
    on a day, month or year before ``before``'s; ``start`` itself when none is.

    Every occurrence of an RFC 5545 rule with FREQ alone falls on ``start``'s wall-clock
    time, on the same weekday (Weekly), day of month (Monthly: months without that day are
    skipped) or date (Yearly: Feb 29 only in leap years). So the occurrence found here by
    arithmetic starts a rule with exactly the later occurrences of the original, and
    walking it costs a few steps however old ``start`` is."""
    target = before.astimezone(start.tzinfo) if start.tzinfo is not None else before
    day_gap = (target.date() - start.date()).days
    if day_gap <= 0:
        return start
    if frequency in ("Daily", "Weekly"):
        step = 1 if frequency == "Daily" else 7
        steps = day_gap // step - 1
        if steps <= 0:
            return start
        return dt.datetime.combine(start.date() + dt.timedelta(days=steps * step), start.timetz())
    if frequency == "Monthly":
        months = (target.year - start.year) * 12 + (target.month - start.month) - 1
        while months > 0:
            year, month = divmod(start.month - 1 + months, 12)
            year, month = start.year + year, month + 1
            if _date_exists(year, month, start.day):
                return start.replace(year=year, month=month)
            months -= 1  # the 31st skips 30-day months, the 29th to 31st skip February
        return start
    years = target.year - start.year - 1  # Yearly
    while years > 0:
        if _date_exists(start.year + years, start.month, start.day):
            return start.replace(year=start.year + years)
        years -= 1  # Feb 29 occurs in leap years only
    return start


def match_schedule(
    now: dt.datetime,
    start: dt.datetime,
    end: dt.datetime,
    frequency: str = "",
    until: dt.datetime | None = None,
) -> tuple[Period | None, Period | None]:
    """(active, upcoming) periods of one override at ``now``."""
    if frequency == "":
        if now < start:
            return None, Period(start, end)
        if now < end:
            return Period(start, end), None
        return None, None
    spec = _FREQ.get(frequency)
    if spec is None:
        raise ScheduleError(
            f'invalid frequency {frequency!r}: it must be one of "Daily", "Weekly", '
            '"Monthly" and "Yearly"'
        )
    freq, years, months, days = spec
    later = _go_date_add(now, years, months, days)
    duration = end - start
    if duration > later - now:
        raise ScheduleError(
            f"the override lasts {duration}, longer than its {frequency} period ({later - now})"
        )
    first = _recent_start(start, frequency, now - duration)
    rule = rrule.rrule(freq, dtstart=first, until=until)  # type: ignore[arg-type]
    starts = rule.between(now - duration + _TICK, now, inc=True)
    if len(starts) > 1:
        raise ScheduleError(f"more than one active occurrence: {starts}")
    active = Period(starts[0], starts[0] + duration) if starts else None
    upcoming_starts = rule.between(now + _TICK, later, inc=True)
    upcoming = (
        Period(upcoming_starts[0], upcoming_starts[0] + duration) if upcoming_starts else None
    )
    return active, upcoming


def _zone(name: Any) -> dt.tzinfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown timeZone {name!r}: use an IANA name such as Europe/Berlin"
        ) from None


def _local_time(value: Any, zone: dt.tzinfo | None) -> dt.datetime | None:
    """``value`` as an aware time: in ``zone`` when it has no offset (UTC without a zone)."""
    if zone is None or value is None or value == "" or isinstance(value, dt.datetime):
        return objects.parse_time(value, strict=True)
    text = str(value)
    try:
        parsed = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {value!r}") from None
    return parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed.astimezone(zone)


def match_overrides(
    now: dt.datetime, overrides: Sequence[Mapping[str, Any]], *, key: str = "minReplicas"
) -> tuple[int | None, Override | None, Override | None]:
    """(minimum override, active, upcoming) over ``spec.scheduledOverrides``.

    ``key`` names the minimum in each override (``minReplicas`` for an HRA, ``minRunners``
    for a scale set). The first active override wins, even when its minimum is unset (later
    active ones are then not consulted, as in ARC); the upcoming one is the earliest to start.
    """
    min_replicas: int | None = None
    active: Override | None = None
    upcoming: Override | None = None
    for o in overrides:
        zone = _zone(o.get("timeZone"))
        try:
            start = _local_time(o.get("startTime"), zone)
            end = _local_time(o.get("endTime"), zone)
            rule = o.get("recurrenceRule") or {}
            until = _local_time(rule.get("untilTime"), zone) if rule.get("untilTime") else None
        except ValueError as err:
            raise ScheduleError(f"scheduled override: {err}") from None
        if start is None or end is None:
            raise ScheduleError("a scheduled override needs startTime and endTime")
        if end <= start:
            raise ScheduleError("a scheduled override must end after it starts")
        local_now = now.astimezone(zone) if zone is not None else now
        a, u = match_schedule(local_now, start, end, str(rule.get("frequency") or ""), until)
        o_min = o.get(key)
        o_min = int(o_min) if o_min is not None else None
        if a is not None and active is None:
            active = Override(a, o_min)
            min_replicas = o_min
        if u is not None and (upcoming is None or u.start < upcoming.period.start):
            upcoming = Override(u, o_min)
    return min_replicas, active, upcoming


def go_time_string(t: dt.datetime) -> str:
    """Go's ``time.Time.String()`` for a UTC time, as ARC prints it in the summary."""
    t = t.astimezone(dt.UTC)
    base = t.strftime("%Y-%m-%d %H:%M:%S")
    if t.microsecond:
        base += f".{t.microsecond:06d}".rstrip("0")
    return base + " +0000 UTC"


def overrides_summary(
    spec_min_replicas: int | None, active: Override | None, upcoming: Override | None
) -> str | None:
    """``status.scheduledOverridesSummary``: what changes next, and when."""
    summary: str | None = None
    if active is not None and (upcoming is None or active.period.end < upcoming.period.start):
        after = spec_min_replicas if spec_min_replicas is not None and spec_min_replicas >= 0 else 1
        summary = f"min={after} time={go_time_string(active.period.end)}"
    if (
        upcoming is not None
        and (active is None or active.period.end > upcoming.period.start)
        and upcoming.min_replicas is not None
    ):
        summary = f"min={upcoming.min_replicas} time={go_time_string(upcoming.period.start)}"
    return summary


def next_boundary(active: Override | None, upcoming: Override | None) -> dt.datetime | None:
    """When the schedule next changes the minimum (to requeue the HRA then)."""
    times = [o.period.end for o in (active,) if o] + [o.period.start for o in (upcoming,) if o]
    return min(times) if times else None
