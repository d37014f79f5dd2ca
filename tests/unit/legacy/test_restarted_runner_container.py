"""A RunnerSet pod's runner container restarts (restartPolicy Always) after its runner
exited, and the restarted runner registers again under the pod's name with a new id.

Graceful stop must then remove that new registration: the pod's exit seen earlier no longer
says the runner de-registered itself (rule 6), and the runner id annotated on the pod names
the first registration, which answers 404. A real-node run left such a runner registered
after its RunnerSet was deleted (tests/realnode/test_realnode_legacy_runnerset.py)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from gharc.controllers.legacy.gracefulstop import GracefulStop
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.pods import RunnerPods
from gharc.github import errors as gherrors


class _Informer:
    def __init__(self) -> None:
        self.handler: Any = None

    def add_event_handler(self, handler: Any) -> None:
        self.handler = handler


def _pod(state: dict[str, Any], *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rs-abcde-0", "namespace": "ns", "uid": "u1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T10:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "runner", "state": state}],
        },
    }


RUNNING = {"running": {"startedAt": "2026-12-03T09:00:00Z"}}
EXITED = {
    "terminated": {
        "exitCode": 0,
        "startedAt": "2026-12-03T09:00:00Z",
        "finishedAt": "2026-12-03T09:01:00Z",
    }
}


def test_a_restarted_runner_container_is_no_longer_taken_for_an_exited_runner() -> None:
    informer = _Informer()
    pods = RunnerPods(SimpleNamespace(informer=lambda *_a, **_k: informer))
    informer.handler.on_add(_pod(RUNNING))
    informer.handler.on_update(None, _pod(EXITED))
    assert pods.exited_before_deletion(_pod(EXITED, deleting=True))
    informer.handler.on_update(None, _pod(RUNNING))  # the kubelet restarted it
    assert not pods.exited_before_deletion(_pod(RUNNING, deleting=True))


class _Client:
    """GitHub after the restart: the first registration (7) is gone, the new one is 9."""

    def __init__(self) -> None:
        self.removed: list[int] = []
        self.fresh_lists = 0

    async def list_runners(self, *, fresh: bool = False) -> list[Any]:
        self.fresh_lists += fresh
        if 9 in self.removed:
            return []
        return [SimpleNamespace(id=9, name="rs-abcde-0")]

    async def remove_runner(self, runner_id: int) -> None:
        if runner_id != 9:
            raise gherrors.NotFound("runner not found", status=404)
        self.removed.append(runner_id)


async def test_removal_finds_the_registration_made_after_the_annotated_one() -> None:
    stop = GracefulStop(kube=None, options=LegacyOptions())  # type: ignore[arg-type]
    client = _Client()
    pod = _pod(RUNNING, deleting=True)
    _, retry = await stop._remove(pod, client, 7)  # type: ignore[arg-type]
    assert retry is None
    assert client.removed == [9]
    assert client.fresh_lists == 1  # a cached list may predate the new registration


def _deleted(state: dict[str, Any], phase: str, policy: str = "Always") -> dict[str, Any]:
    pod = _pod(state, deleting=True)
    pod["metadata"]["deletionGracePeriodSeconds"] = 30  # requested at 09:59:30
    pod["spec"] = {"restartPolicy": policy}
    pod["status"]["phase"] = phase
    return pod


async def test_a_deleted_pod_is_held_until_its_runner_cannot_start_again() -> None:
    """The CI failure: graceful stop took the exit after the job for the last word (rule 6),
    the kubelet started the runner container again, and that runner registered again."""
    clock = [dt.datetime(2026, 12, 3, 9, 59, 40, tzinfo=dt.UTC)]
    stop = GracefulStop(kube=None, options=LegacyOptions(clock=lambda: clock[0]))  # type: ignore[arg-type]
    client = _Client()
    # exited after its job, before the deletion: the kubelet may still restart it
    assert await stop.after_deletion(_deleted(EXITED, "Running"), client) is not None  # type: ignore[arg-type]
    assert client.removed == [] and client.fresh_lists == 0
    # the kubelet stopped the pod for its deletion: the name is asked of GitHub once more
    assert await stop.after_deletion(_deleted(EXITED, "Failed"), client) is None  # type: ignore[arg-type]
    assert client.removed == [9] and client.fresh_lists == 1
    # a runner stopped after the deletion began is not started again either
    stopped = {"terminated": {**EXITED["terminated"], "finishedAt": "2026-12-03T09:59:35Z"}}
    assert await stop.after_deletion(_deleted(stopped, "Running"), client) is None  # type: ignore[arg-type]
    # no kubelet answering past the deadline (a lost node): nothing will start there
    clock[0] = dt.datetime(2026, 12, 3, 10, 0, 11, tzinfo=dt.UTC)
    assert await stop.after_deletion(_deleted(RUNNING, "Running"), client) is None  # type: ignore[arg-type]


async def test_a_runner_pod_that_never_restarts_needs_no_second_look() -> None:
    stop = GracefulStop(kube=None, options=LegacyOptions())  # type: ignore[arg-type]
    client = _Client()
    assert await stop.after_deletion(_deleted(EXITED, "Running", "Never"), client) is None  # type: ignore[arg-type]
    assert client.fresh_lists == 0 and client.removed == []
