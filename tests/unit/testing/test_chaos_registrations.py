"""The chaos bar on registrations: one runner registered twice under one name is one runner,
and a case passes with it only when its fault explains it (the leader died holding the
answer to the first registration)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from testworld.chaos.cases import _registrations_lost_with
from testworld.chaos.report import CaseResult, problems


def _world(issued: list[tuple[str, int, float]]) -> Any:
    from testworld.world import World

    world = SimpleNamespace(github=SimpleNamespace(state=SimpleNamespace(jit_issued=issued)))
    world.registrations_by_runner = lambda: World.registrations_by_runner(world)  # type: ignore[arg-type]
    return world


def _result(**kw: Any) -> CaseResult:
    kw.setdefault("runners_created", 24)
    return CaseResult(case="c", submitted=24, done=24, **kw)


def test_a_second_registration_fails_the_case_unless_the_fault_explains_it() -> None:
    assert problems(_result()) == []
    assert problems(_result(registrations_replaced=1)) == [
        "24 runners created for 24 jobs, 1 registered twice "
        "(0 extra and 0 replaced explained by the fault)"
    ]
    # Lost with the leader (leader-kill) ...
    assert problems(_result(registrations_replaced=1, allowed_replaced_registrations=1)) == []
    # ... or the registration a lost pod's used config costs (used-jit-config): either a new
    # runner or the same one afresh, but not both for one loss.
    assert problems(_result(registrations_replaced=1, allowed_extra_runners=1)) == []
    assert problems(_result(runners_created=25, allowed_extra_runners=1)) == []
    assert problems(_result(runners_created=25, registrations_replaced=1, allowed_extra_runners=1))


def test_extra_registrations_stay_within_the_runners_per_job_bar() -> None:
    many = CaseResult(case="c", submitted=10, done=10, runners_created=10, registrations_replaced=1)
    many.allowed_extra_runners = 1
    assert problems(many)  # 11 registrations for 10 jobs: over 1.05 per job


def test_only_a_registration_made_before_the_kill_and_redone_after_it_is_lost_with_it() -> None:
    dead = 100.0
    world = _world(
        [
            ("lost", 1, 99.9),  # asked by the old leader; its answer died with it
            ("lost", 2, 116.0),  # the successor's replacement
            ("late", 3, 100.3),  # served just after the death: the request was in flight
            ("late", 4, 117.0),
            ("twice-before", 5, 90.0),  # replaced while the old leader lived: unexplained
            ("twice-before", 6, 95.0),
            ("twice-after", 7, 110.0),  # replaced by the successor alone: unexplained
            ("twice-after", 8, 111.0),
            ("once", 9, 99.0),
        ]
    )
    assert _registrations_lost_with(world, dead) == ["late", "lost"]
