"""The Failed-runner replace streak read from and written to an EphemeralRunnerSet."""

from __future__ import annotations

from gharc.controllers.scaleset import failed_runner_pacing as fb


def _ers(status: dict[str, object] | None = None) -> dict[str, object]:
    return {"metadata": {"name": "set", "uid": "u"}, "status": status or {}}


def test_no_record_is_a_fresh_ladder() -> None:
    assert fb.read(_ers()) == fb.Streak()


def test_a_written_streak_reads_back() -> None:
    streak = fb.Streak(2, 1_800_000_000.25)
    patch = fb.status_patch(_ers(), streak, None)
    assert patch is not None
    status = patch["status"]
    assert status["failedRunnerReplacements"] == 2
    back = fb.read(_ers(status))
    assert back.count == 2 and abs(back.last - streak.last) < 0.001
    # Written once: the same streak and condition need no second write.
    assert fb.status_patch(_ers(status), streak, None) is None


def test_the_condition_is_true_while_a_runner_is_held_back() -> None:
    streak = fb.Streak(2, 1_800_000_000.0)
    status = fb.status_patch(_ers(), streak, None)["status"]  # type: ignore[index]
    held = fb.status_patch(_ers(status), streak, "runner r is replaced in 30s")
    assert held is not None
    [condition] = held["status"]["conditions"]
    assert condition["type"] == fb.FAILED_RUNNER_BACKOFF
    assert condition["status"] == "True" and condition["reason"] == fb.REASON_BACKING_OFF
    assert "failedRunnerReplacements" not in held["status"]  # the streak did not change


def test_the_later_record_wins() -> None:
    persisted, remembered = fb.Streak(1, 100.0), fb.Streak(2, 130.0)
    assert persisted.later(remembered) == remembered
    assert remembered.later(persisted) == remembered
    assert persisted.later(None) == persisted
