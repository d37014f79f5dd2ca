"""Workload schedules are deterministic and shaped as configured."""

from __future__ import annotations

import pytest

from testworld.sim.workload import Burst, Workload


def test_bursts_arrive_together_and_trickle_spreads_out() -> None:
    w = Workload(bursts=[Burst(0, 5), Burst(10, 3)], trickle_per_minute=60, trickle_seconds=30)
    arrivals = w.arrivals()
    assert sum(1 for a in arrivals if a.at == 0) >= 5
    assert sum(1 for a in arrivals if a.at == 10) >= 3
    trickle = [a for a in arrivals if a.at not in (0, 10)]
    assert 10 <= len(trickle) <= 60  # 30 expected
    assert all(0 < a.at < 30 for a in trickle)
    assert [a.at for a in arrivals] == sorted(a.at for a in arrivals)


def test_same_seed_gives_the_same_schedule() -> None:
    assert Workload(seed=7).arrivals() == Workload(seed=7).arrivals()
    assert Workload(seed=7).arrivals() != Workload(seed=8).arrivals()


def test_parse_reads_the_compact_form() -> None:
    w = Workload.parse("burst=0:4,trickle=0/1,jobs=1-2,failures=0")
    arrivals = w.arrivals()
    assert len(arrivals) == 4
    assert all(1 <= a.duration <= 2 and a.result == "succeeded" for a in arrivals)


def test_parse_rejects_unknown_items_with_the_accepted_forms() -> None:
    with pytest.raises(ValueError, match="burst=AT:N"):
        Workload.parse("bursts=3")
