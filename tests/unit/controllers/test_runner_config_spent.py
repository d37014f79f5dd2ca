"""When is a runner's single-use JIT config spent (ARC #4588)?"""

from __future__ import annotations

from typing import Any

from gharc.controllers.scaleset.pod_verdicts import pod_was_running, runner_started


def _er(phase: str = "", ready: bool = False) -> dict[str, Any]:
    return {"status": {"phase": phase, "ready": ready, "runnerId": 7}}


def _pod(state: dict[str, Any] | None) -> dict[str, Any]:
    statuses = [] if state is None else [{"name": "runner", "state": state}]
    return {"status": {"phase": "Failed", "containerStatuses": statuses}}


def test_a_runner_seen_running_may_have_used_its_config() -> None:
    assert pod_was_running(_er("Running"))
    assert pod_was_running(_er("Pending", ready=True))
    assert not pod_was_running(_er("Pending"))


def test_a_pod_whose_runner_container_started_spent_the_config() -> None:
    started = {"terminated": {"exitCode": 1, "startedAt": "2026-01-01T00:00:00Z"}}
    assert runner_started(_er("Pending"), _pod(started))
    assert runner_started(_er("Pending"), _pod({"running": {}}))


def test_a_pod_that_never_started_its_runner_did_not() -> None:
    assert not runner_started(_er("Pending"), _pod(None))
    assert not runner_started(_er("Pending"), _pod({"waiting": {"reason": "ErrImagePull"}}))
    assert not runner_started(_er("Pending"), _pod({"terminated": {"exitCode": 128}}))
