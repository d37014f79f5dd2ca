"""A schedule's windows are found by calendar arithmetic, however old its ``startTime``.

A tenant's override that started in the year 1000 once cost 16 s of CPU per evaluation on
the controller's shared event loop, long enough to lose the leader Lease. These tests pin
two things: the windows found are the ones RFC 5545 gives when the rule is walked from its
real start, and the rule that is walked begins close to ``now``.
"""

from __future__ import annotations

import datetime as dt
import random
from zoneinfo import ZoneInfo

import pytest
from dateutil import rrule

from gharc.api import schedule

UTC = dt.UTC
_FREQ = {
    "Daily": rrule.DAILY,
    "Weekly": rrule.WEEKLY,
    "Monthly": rrule.MONTHLY,
    "Yearly": rrule.YEARLY,
}


def _walked_from_start(
    now: dt.datetime, start: dt.datetime, end: dt.datetime, frequency: str
) -> tuple[schedule.Period | None, schedule.Period | None]:
    """The reference: every occurrence from ``start`` on, as RFC 5545 defines them."""
    duration = end - start
    rule = rrule.rrule(_FREQ[frequency], dtstart=start)
    tick = dt.timedelta(microseconds=1)
    active = rule.between(now - duration + tick, now, inc=True)
    later = schedule._go_date_add(
        now,
        *{"Daily": (0, 0, 1), "Weekly": (0, 0, 7), "Monthly": (0, 1, 0), "Yearly": (1, 0, 0)}[
            frequency
        ],
    )
    upcoming = rule.between(now + tick, later, inc=True)
    return (
        schedule.Period(active[0], active[0] + duration) if active else None,
        schedule.Period(upcoming[0], upcoming[0] + duration) if upcoming else None,
    )


@pytest.mark.parametrize("frequency", ["Daily", "Weekly", "Monthly", "Yearly"])
@pytest.mark.parametrize("zone", [UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")])
def test_windows_match_the_rule_walked_from_its_start(frequency: str, zone: dt.tzinfo) -> None:
    rng = random.Random(f"{frequency}{zone}")
    longest = {"Daily": 20, "Weekly": 6 * 24, "Monthly": 27 * 24, "Yearly": 300 * 24}[frequency]
    for _ in range(40):
        # starts within 5 years before now, on any day (the 29th-31st included), any hour
        start = dt.datetime(2021, 1, 1, tzinfo=zone) + dt.timedelta(
            days=rng.randrange(0, 5 * 366), hours=rng.randrange(24), minutes=rng.choice((0, 30))
        )
        start = start.replace(day=min(start.day, 28) if rng.random() < 0.3 else start.day)
        end = start + dt.timedelta(hours=rng.randrange(1, longest))
        now = dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(
            minutes=rng.randrange(0, 366 * 24 * 60)
        )
        local_now = now.astimezone(zone)
        assert schedule.match_schedule(local_now, start, end, frequency) == _walked_from_start(
            local_now, start, end, frequency
        ), (frequency, start, end, now)


@pytest.mark.parametrize(
    ("frequency", "start", "now", "active_start"),
    [
        ("Daily", "1000-01-01T08:00:00", "2026-12-05T08:30:00", "2026-12-05T08:00:00"),
        ("Weekly", "1000-01-05T08:00:00", "2026-12-05T09:00:00", None),
        ("Monthly", "1000-01-31T08:00:00", "2026-12-31T08:10:00", "2026-12-31T08:00:00"),
        ("Monthly", "1000-01-31T08:00:00", "2026-11-30T08:10:00", None),
        ("Yearly", "1004-02-29T08:00:00", "2028-02-29T08:10:00", "2028-02-29T08:00:00"),
        ("Yearly", "1004-02-29T08:00:00", "2027-02-28T08:10:00", None),
    ],
)
def test_a_thousand_year_old_start_is_not_walked(
    monkeypatch: pytest.MonkeyPatch,
    frequency: str,
    start: str,
    now: str,
    active_start: str | None,
) -> None:
    walked_from: list[dt.datetime] = []
    real_rrule = rrule.rrule

    def spy(freq: int, **kwargs: object) -> rrule.rrule:
        walked_from.append(kwargs["dtstart"])  # type: ignore[arg-type]
        return real_rrule(freq, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rrule, "rrule", spy)
    begin = dt.datetime.fromisoformat(start).replace(tzinfo=UTC)
    at = dt.datetime.fromisoformat(now).replace(tzinfo=UTC)
    active, _ = schedule.match_schedule(at, begin, begin + dt.timedelta(hours=1), frequency)
    expected = dt.datetime.fromisoformat(active_start).replace(tzinfo=UTC) if active_start else None
    assert (active.start if active else None) == expected
    assert walked_from and all(at - w < dt.timedelta(days=9 * 366) for w in walked_from)


def test_an_override_from_the_year_1000_evaluates_through_match_overrides() -> None:
    override = {
        "startTime": "1000-01-01T08:00:00Z",
        "endTime": "1000-01-01T18:00:00Z",
        "recurrenceRule": {"frequency": "Daily"},
        "minRunners": 4,
    }
    now = dt.datetime(2026, 12, 5, 12, tzinfo=UTC)
    minimum, active, upcoming = schedule.match_overrides(now, [override], key="minRunners")
    assert minimum == 4
    assert active is not None and active.period.start == dt.datetime(2026, 12, 5, 8, tzinfo=UTC)
    assert upcoming is not None and upcoming.period.start == dt.datetime(2026, 12, 6, 8, tzinfo=UTC)
