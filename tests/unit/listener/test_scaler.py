"""Patch IDs and desired counts: the contract with the EphemeralRunnerSet controller (§9.3, B3)."""

from __future__ import annotations

import pytest

from gharc.listener.scaler import MAX_PATCH_SEQ, Patch, Scaler, desired_count


def publish(scaler: Scaler, assigned: int) -> Patch | None:
    """Plan and, when there is something to send, commit as a successful patch would."""
    plan = scaler.plan(assigned)
    if plan is not None:
        scaler.commit(plan)
    return plan


@pytest.mark.parametrize(
    ("min_runners", "max_runners", "assigned", "expected"),
    [(0, 10, 0, 0), (0, 10, 3, 3), (2, 10, 3, 5), (2, 4, 3, 4), (1, 1, 50, 1), (3, 9, -1, 3)],
)
def test_desired_count(min_runners: int, max_runners: int, assigned: int, expected: int) -> None:
    assert desired_count(min_runners, max_runners, assigned) == expected


def test_first_patch_has_id_zero_then_ids_increase_with_work() -> None:
    scaler = Scaler(0, 10)
    first = publish(scaler, 0)
    assert first is not None and (first.replicas, first.patch_id) == (0, 0)
    assert publish(scaler, 3) == Patch(3, 1, 1)
    scaler.mark_dirty()
    assert publish(scaler, 3) == Patch(3, 2, 2)
    # Not idle (target above min): every evaluation gets a fresh ID, so the controller
    # re-checks a shortfall each cycle.
    assert publish(scaler, 3) == Patch(3, 3, 3)


def test_idle_resets_to_zero_and_is_then_suppressed() -> None:
    scaler = Scaler(1, 5)
    assert publish(scaler, 0) == Patch(1, 0, 0)  # first publish
    assert publish(scaler, 0) is None  # identical (1, 0): not sent again
    assert publish(scaler, 2) == Patch(3, 1, 1)
    scaler.mark_dirty()  # the jobs complete
    assert publish(scaler, 0) == Patch(1, 2, 2)  # target changed: fresh ID
    # Nothing happened since, target unchanged and == min: idle, id 0.
    assert publish(scaler, 0) == Patch(1, 0, 3)
    assert publish(scaler, 0) is None
    assert publish(scaler, 0) is None
    assert scaler.seq == 3  # suppressed evaluations do not advance the sequence


def test_dirty_at_min_gets_a_fresh_id_not_zero() -> None:
    scaler = Scaler(0, 5)
    publish(scaler, 0)
    scaler.mark_dirty()  # a job completed while the count stayed at min
    patch = publish(scaler, 0)
    assert patch is not None and patch.patch_id == 1
    assert publish(scaler, 0) == Patch(0, 0, 2)


def test_unchanged_target_above_min_is_never_zero() -> None:
    scaler = Scaler(0, 5)
    publish(scaler, 2)
    ids = [publish(scaler, 2) for _ in range(3)]
    assert [p.patch_id for p in ids if p] == [1, 2, 3]


def test_failed_patch_changes_nothing() -> None:
    scaler = Scaler(0, 5)
    publish(scaler, 0)
    scaler.mark_dirty()
    plan = scaler.plan(2)
    assert plan == Patch(2, 1, 1)
    # not committed (the API server refused): the retry plans the same patch, still dirty
    assert scaler.plan(2) == plan and scaler.dirty


def test_wraps_after_max_int32_to_one() -> None:
    scaler = Scaler(0, 5)
    scaler.seq = MAX_PATCH_SEQ - 1
    scaler.last_target = 2
    assert publish(scaler, 2) == Patch(2, MAX_PATCH_SEQ, MAX_PATCH_SEQ)
    # ARC resets the sequence to 0 and increments: 0 stays reserved for "idle".
    assert publish(scaler, 2) == Patch(2, 1, 1)
    assert publish(scaler, 2) == Patch(2, 2, 2)


def test_wrap_while_idle_still_publishes_zero() -> None:
    scaler = Scaler(0, 5)
    scaler.seq = MAX_PATCH_SEQ
    scaler.last_target = 0
    assert publish(scaler, 0) == Patch(0, 0, 1)


def test_capped_by_max_and_floored_by_min() -> None:
    scaler = Scaler(2, 4)
    assert publish(scaler, 10) == Patch(4, 0, 0)
    assert publish(scaler, 0) == Patch(2, 1, 1)


def test_rejects_max_below_min() -> None:
    with pytest.raises(ValueError):
        Scaler(3, 2)
