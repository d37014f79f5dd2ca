"""One odd message must never stall the listener.

The fake queue here behaves like the service's: a message stays at the head of the queue
until it is deleted, and ``get_message`` parses the wire form exactly as
``ActionsClient.get_message`` does. A message the listener cannot parse or handle used to
be retried forever (a ``ValueError`` counted as transient) and everything queued behind it
waited; now it is logged, counted, deleted and skipped.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from listener_fakes import FakeActions, FakePatcher, config, job, running, until
from prometheus_client import CollectorRegistry

from gharc.github import errors as gherrors
from gharc.github.models import RunnerScaleSet, RunnerScaleSetMessage
from gharc.listener.app import Listener
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.runnerset_writes import KubePatchError
from gharc.listener.session import is_transient

pytestmark = pytest.mark.looptime


class WireQueue(FakeActions):
    """Holds wire-form messages; the head is redelivered until the listener deletes it."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.polls = 0

    def put(self, wire: dict[str, Any]) -> None:
        self.pending.append(wire)
        self.arrived.set()

    async def get_message(
        self, queue_url: str, queue_token: str, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        self.polls += 1
        head = next((m for m in self.pending if m.get("messageId", 0) > last_message_id), None)
        if head is None:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), timeout=self.poll_seconds)
            except TimeoutError:
                return None
            return None
        return RunnerScaleSetMessage.from_wire(json.loads(json.dumps(head)))

    async def delete_message(self, queue_url: str, queue_token: str, message_id: int) -> None:
        await super().delete_message(queue_url, queue_token, message_id)
        self.pending = [m for m in self.pending if m.get("messageId") != message_id]


def wire(message_id: int, body: Any, assigned: int = 0) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "messageType": "RunnerScaleSetJobMessages",
        "body": body if body is None or isinstance(body, str) else json.dumps(body),
        "statistics": {"totalAssignedJobs": assigned},
    }


def _metrics() -> ListenerMetrics:
    return ListenerMetrics(name="ers", namespace="ns", registry=CollectorRegistry())


def dropped(metrics: ListenerMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "gharc_listener_messages_dropped_total",
        {"name": "ers", "namespace": "ns", "reason": reason},
    )
    return value or 0.0


ODD_BODIES: dict[str, Any] = {
    "missing runnerRequestId": [{"messageType": "JobCompleted", "result": "succeeded"}],
    "runnerRequestId 0": [
        {**job("JobAssigned", 0)},
        {**job("JobStarted", 0), "runnerName": "r-1"},
    ],
    "null body": None,
    "null jobWorkflowRef": [{**job("JobStarted", 4), "jobWorkflowRef": None, "runnerName": "r"}],
    "null requestLabels": [{**job("JobAvailable", 4), "requestLabels": None}],
    "null runnerRequestId": [{**job("JobCompleted", 4), "runnerRequestId": None}],
}


@pytest.mark.parametrize("body", list(ODD_BODIES.values()), ids=list(ODD_BODIES))
async def test_odd_but_valid_message_is_handled_and_the_next_one_too(body: Any) -> None:
    api, patcher = WireQueue(), FakePatcher(runners={"r-1"})
    metrics = _metrics()
    listener = Listener(config(), api, patcher, metrics=metrics)
    api.put(wire(1, body))
    api.put(wire(2, [job("JobAvailable", 5)], assigned=1))
    async with running(listener) as task:
        await until(lambda: [5] in api.acquired and any(r == 1 for r, _ in patcher.replicas))
        assert not task.done()
    assert api.deleted_messages == [1, 2]
    assert dropped(metrics, "malformed") == 0


@pytest.mark.parametrize(
    "body", ["{not json", json.dumps({"not": "a list"})], ids=["not json", "not a list"]
)
async def test_unparseable_message_is_dropped_deleted_and_counted(body: str) -> None:
    api, patcher = WireQueue(), FakePatcher()
    metrics = _metrics()
    listener = Listener(config(), api, patcher, metrics=metrics)
    api.put(wire(1, body))
    api.put(wire(2, [job("JobAvailable", 5)], assigned=1))
    async with running(listener):
        await until(lambda: api.deleted_messages == [1, 2])
        assert api.acquired == [[5]]
    assert dropped(metrics, "malformed") == 1


async def test_an_unparseable_job_in_a_batch_is_counted_and_the_rest_handled() -> None:
    api, patcher = WireQueue(), FakePatcher()
    metrics = _metrics()
    listener = Listener(config(), api, patcher, metrics=metrics)
    bad = {**job("JobStarted", 1), "queueTime": "yesterday-ish"}
    api.put(wire(1, [bad, job("JobAvailable", 2)], assigned=1))
    async with running(listener):
        await until(lambda: api.deleted_messages == [1])
        assert api.acquired == [[2]]
    assert dropped(metrics, "job") == 1


@pytest.mark.parametrize("bug", [TypeError("bad operand"), ValueError("bad value"), KeyError("x")])
async def test_a_bug_handling_a_message_drops_it_and_polling_goes_on(bug: Exception) -> None:
    api, patcher = WireQueue(), FakePatcher(runners={"r-1"})
    metrics = _metrics()
    listener = Listener(config(), api, patcher, metrics=metrics)

    async def broken(runner_name: str, status: dict[str, Any]) -> None:
        raise bug

    patcher.patch_runner_job = broken  # type: ignore[method-assign]
    api.put(wire(1, [{**job("JobStarted", 1), "runnerName": "r-1"}], assigned=1))
    api.put(wire(2, [job("JobAvailable", 2)], assigned=2))
    async with running(listener) as task:
        await until(lambda: api.deleted_messages == [1, 2] and api.acquired == [[2]])
        assert not task.done()
    assert dropped(metrics, "error") == 1


async def test_transient_failures_still_redeliver_the_message() -> None:
    api, patcher = WireQueue(), FakePatcher()
    metrics = _metrics()
    listener = Listener(config(), api, patcher, metrics=metrics, step_attempts=1)
    api.acquire_errors.append(gherrors.ServerError("acquire 503", status=503))
    api.put(wire(1, [job("JobAvailable", 1)], assigned=1))
    async with running(listener):
        await until(lambda: api.deleted_messages == [1])
        assert api.acquired == [[1]]
    assert dropped(metrics, "error") == 0


@pytest.mark.parametrize(
    ("err", "transient"),
    [
        (ValueError("ours"), False),
        (TypeError("ours"), False),
        (KeyError("ours"), False),
        (httpx.ReadTimeout("slow"), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (gherrors.ServerError("x", status=502), True),
        (KubePatchError("apiserver", 503), True),
    ],
)
def test_is_transient(err: BaseException, transient: bool) -> None:
    assert is_transient(err) is transient


class LaggingQueue(WireQueue):
    """Statistics in messages lag their bodies (ARC #3420); a fresh read is current."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh_assigned = 0
        self.fresh_reads = 0

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet | None:
        self.fresh_reads += 1
        return RunnerScaleSet.model_validate(
            {"id": scale_set_id, "statistics": {"totalAssignedJobs": self.fresh_assigned}}
        )


async def test_statistics_behind_the_body_are_read_fresh_at_once() -> None:
    api, patcher = LaggingQueue(), FakePatcher()
    listener = Listener(config(), api, patcher)
    api.fresh_assigned = 2
    api.put(wire(1, [job("JobAssigned", 1), job("JobAssigned", 2)], assigned=0))
    async with running(listener):
        await until(lambda: any(r == 2 for r, _ in patcher.replicas), timeout=5)
    assert api.fresh_reads >= 1


async def test_statistics_are_confirmed_once_the_queue_goes_quiet() -> None:
    # The body does not contradict its counts (one assigned, one counted), but the counts
    # are a delivery behind: the second job was assigned too. No later message says so.
    api, patcher = LaggingQueue(), FakePatcher()
    listener = Listener(config(), api, patcher)
    api.fresh_assigned = 2
    api.put(wire(1, [job("JobAssigned", 2)], assigned=1))
    async with running(listener):
        await until(lambda: any(r == 2 for r, _ in patcher.replicas), timeout=120)
    assert api.fresh_reads == 1


async def test_a_quiet_read_that_confirms_the_count_sends_the_idle_patch_at_once() -> None:
    """A quiet set's job: its completion brings the count back to the minimum, and the
    quiet poll's fresh read says the same. That read changes nothing, so the idle patch
    (patch ID 0, which lets the set scale down) goes out at once, not after a fresh ID that
    asks the set for nothing new and another long poll: one set write per job less."""
    api, patcher = LaggingQueue(), FakePatcher()
    listener = Listener(config(), api, patcher)
    api.put(wire(1, [job("JobAssigned", 7)], assigned=1))
    api.put(wire(2, [job("JobCompleted", 7, result="succeeded", runnerName="r")], assigned=0))
    async with running(listener):
        await until(lambda: api.fresh_reads == 1, timeout=120)
        await until(lambda: patcher.replicas[-1] == (0, 0), timeout=120)
        polls = listener.polls
        await until(lambda: listener.polls >= polls + 2, timeout=300)
    assert [p for p in patcher.replicas if p[0] == 0][1:] == [(0, 2), (0, 0)], patcher.replicas
    assert api.fresh_reads == 1
