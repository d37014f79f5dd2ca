"""The write fence and the event-loop lag monitor, without an API server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gharc.controllers.loopstall import _target
from gharc.kube.client import KubeClient
from gharc.kube.fence import NotLeading, WriteFence
from gharc.kube.looplag import LoopLagMonitor, Stall
from gharc.kube.resources import CONFIG_MAPS


class _Answer:
    status = 201
    headers: dict[str, str] = {}

    async def read(self) -> bytes:
        return b'{"metadata": {"name": "x"}}'


class _Transport:
    """Answers every request with 201 and remembers (method, timeout)."""

    host = "127.0.0.1"

    def __init__(self) -> None:
        self.sent: list[tuple[str, float | None]] = []

    async def send_request(self, method: str, path: str, **kwargs: Any) -> _Answer:
        self.sent.append((method, kwargs["timeout"]))
        return _Answer()

    async def close(self) -> None:
        pass


def test_an_unarmed_fence_lets_every_write_through() -> None:
    fence = WriteFence()
    assert not fence.armed
    assert fence.check("POST", "/x") == float("inf")


def test_an_armed_fence_is_open_only_up_to_its_deadline() -> None:
    fence = WriteFence()
    fence.arm()
    with pytest.raises(NotLeading, match="no longer holds the leader Lease"):
        fence.check("POST", "/api/v1/namespaces/a/pods")
    fence.extend_to(time.monotonic() + 5)
    assert 4 < fence.check("PATCH", "/x") <= 5
    fence.extend_to(time.monotonic() - 1)  # an older renewal never shortens it
    assert fence.remaining() > 4
    fence.close()
    with pytest.raises(NotLeading):
        fence.check("DELETE", "/x")
    assert fence.refused == 2


async def test_a_closed_fence_stops_writes_but_not_reads_and_cuts_timeouts() -> None:
    transport = _Transport()
    kube = KubeClient(transport, request_timeout=30)
    listener_view = kube.for_caller("listener")
    kube.fence.arm()
    kube.fence.extend_to(time.monotonic() + 2)
    await kube.create(CONFIG_MAPS, {"metadata": {"name": "a", "namespace": "n"}})
    method, timeout = transport.sent[-1]
    assert method == "POST" and timeout is not None and timeout <= 2, "cut to the time left"
    kube.fence.close()
    with pytest.raises(NotLeading):
        await listener_view.create(CONFIG_MAPS, {"metadata": {"name": "b", "namespace": "n"}})
    await kube.get(CONFIG_MAPS, "a", namespace="n")
    assert [m for m, _ in transport.sent] == ["POST", "GET"], "the refused write was not sent"


async def test_a_held_loop_is_measured_and_named_after_the_work_that_held_it() -> None:
    stalls: list[Stall] = []
    monitor = LoopLagMonitor(interval=0.05, threshold=0.5, on_stall=stalls.append)
    watching = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.2)

    async def reconcile() -> None:
        time.sleep(1.2)  # noqa: ASYNC251 - a tenant's input computing without yielding

    await asyncio.create_task(reconcile(), name="reconcile:ephemeralrunner:team-a/runner-1")
    await asyncio.sleep(0.2)
    watching.cancel()
    await asyncio.gather(watching, return_exceptions=True)
    assert len(stalls) == 1, stalls
    assert stalls[0].work == "reconcile:ephemeralrunner:team-a/runner-1"
    assert stalls[0].seconds >= 1.0
    assert monitor.longest == stalls[0]


@pytest.mark.parametrize(
    ("work", "expected"),
    [
        ("reconcile:ephemeralrunner:team-a/runner-1", ("EphemeralRunner", "team-a", "runner-1")),
        ("reconcile:autoscalingrunnerset:t/set", ("AutoscalingRunnerSet", "t", "set")),
        (
            "listener:arc-systems/set-754b578d-listener",
            ("AutoscalingListener", "arc-systems", "set-754b578d-listener"),
        ),
        ("reconcile:nodeloss:/node-1", None),
        ("event-recorder", None),
        ("", None),
    ],
)
def test_a_hold_is_reported_on_the_object_its_work_names(
    work: str, expected: tuple[str, str, str] | None
) -> None:
    target = _target(work)
    assert (None if target is None else (target[0].kind, target[1], target[2])) == expected
