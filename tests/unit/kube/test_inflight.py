"""A namespace's burst holds at most N requests in flight; another namespace is not behind it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gharc.kube.client import KubeClient
from gharc.kube.inflight import NamespaceInFlight


class SlowServer:
    """A transport whose answers take until released, recording what is in flight."""

    host = "https://127.0.0.1:1"

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.sent: list[str] = []
        self.release = asyncio.Event()

    async def send_request(self, method: str, path: str, **_: Any) -> Any:
        ns = path.split("/namespaces/")[1].split("/")[0]
        self.sent.append(ns)
        self.in_flight[ns] = self.in_flight.get(ns, 0) + 1
        self.peak[ns] = max(self.peak.get(ns, 0), self.in_flight[ns])
        try:
            await self.release.wait()
        finally:
            self.in_flight[ns] -= 1
        return _Response()

    async def close(self) -> None:
        pass


class _Response:
    status = 200
    headers: dict[str, str] = {}

    async def read(self) -> bytes:
        return b"{}"

    def release(self) -> None:
        pass


async def _send(kube: KubeClient, ns: str) -> None:
    await kube._send("GET", f"/api/v1/namespaces/{ns}/pods/p", verb="get", label="pods")


async def test_a_burst_holds_at_most_the_limit_and_another_namespace_goes_at_once() -> None:
    server = SlowServer()
    kube = KubeClient(server, max_in_flight_per_namespace=8)
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(400)]
    for _ in range(5):
        await asyncio.sleep(0)
    quiet = asyncio.create_task(_send(kube, "quiet"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert server.in_flight["burst"] == 8
    assert server.in_flight.get("quiet") == 1, "the quiet namespace waited behind the burst"
    server.release.set()
    await asyncio.gather(*burst, quiet)
    assert server.peak["burst"] == 8 and len(server.sent) == 401


async def test_without_a_limit_the_burst_goes_out_at_once() -> None:
    server = SlowServer()
    kube = KubeClient(server)
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(50)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert server.in_flight["burst"] == 50
    server.release.set()
    await asyncio.gather(*burst)


async def test_idle_namespaces_are_forgotten() -> None:
    limits = NamespaceInFlight(2)
    async with limits.slot("a"):
        assert limits.in_use("a") == 1
    assert limits.in_use("a") == 0 and not limits._running and not limits._waiting


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        NamespaceInFlight(0)


async def test_a_write_that_waited_for_a_slot_is_fenced_when_it_gets_one() -> None:
    """The fence is checked when the request is about to go, not before its wait for a
    slot: a leader that lost its Lease while a write queued must not send it."""
    from gharc.kube.fence import NotLeading

    server = SlowServer()
    kube = KubeClient(server, max_in_flight_per_namespace=1)
    kube.fence.arm()
    kube.fence.extend_to(time.monotonic() + 60)
    first = asyncio.create_task(_send(kube, "burst"))
    for _ in range(5):
        await asyncio.sleep(0)
    queued = asyncio.create_task(
        kube._send("PATCH", "/api/v1/namespaces/burst/pods/p", verb="patch", label="pods")
    )
    for _ in range(5):
        await asyncio.sleep(0)
    kube.fence.close()  # the Lease is lost while the write waits for its slot
    server.release.set()
    await first
    with pytest.raises(NotLeading):
        await queued
    assert len(server.sent) == 1, "the fenced write reached the server"


class StepServer:
    """A transport whose answers are released one by one, oldest first."""

    host = "https://127.0.0.1:1"

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.pending: list[asyncio.Future[None]] = []

    async def send_request(self, method: str, path: str, **_: Any) -> Any:
        ns = path.split("/namespaces/")[1].split("/")[0]
        self.in_flight[ns] = self.in_flight.get(ns, 0) + 1
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(answer)
        try:
            await answer
        finally:
            self.in_flight[ns] -= 1
        return _Response()

    async def answer(self, count: int) -> None:
        for _ in range(count):
            self.pending.pop(0).set_result(None)
        for _ in range(10):
            await asyncio.sleep(0)

    async def close(self) -> None:
        pass


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.mark.looptime
async def test_a_burst_shares_while_another_namespace_is_active_and_not_after() -> None:
    """Alone, a burst has the whole cap (16); while another tenant is active it has an
    eighth (2), so the other's requests meet 2 of the burst's at the API server, not 16;
    ``window`` seconds after the other went quiet, the burst has 16 again."""
    server = StepServer()
    kube = KubeClient(server, max_in_flight_per_namespace=16)
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(100)]
    await _settle()
    assert server.in_flight["burst"] == 16
    quiet = asyncio.create_task(_send(kube, "quiet"))
    await _settle()
    assert server.in_flight["quiet"] == 1
    await server.answer(16)  # the burst's first 16 are answered; now it gets 2 at a time
    assert server.in_flight["burst"] == 2
    await server.answer(1)  # quiet's request (the 17th sent) is answered: quiet goes idle
    await quiet
    await server.answer(2)
    assert server.in_flight["burst"] == 2, "the quiet namespace was active a moment ago"
    await asyncio.sleep(6)  # the window passes with no request from "quiet"
    await server.answer(1)
    assert server.in_flight["burst"] == 16
    for task in burst:
        task.cancel()
    await asyncio.gather(*burst, return_exceptions=True)


async def test_the_controllers_own_namespace_is_neither_capped_nor_another_tenant() -> None:
    server = StepServer()
    kube = KubeClient(server, max_in_flight_per_namespace=8)
    kube.exempt_from_in_flight_limit("gharc-system")
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(20)]
    own = [asyncio.create_task(_send(kube, "gharc-system")) for _ in range(20)]
    await _settle()
    assert server.in_flight == {"burst": 8, "gharc-system": 20}
    await server.answer(8)
    assert server.in_flight["burst"] == 8, "the controller's own requests made the burst share"
    for task in [*burst, *own]:
        task.cancel()
    await asyncio.gather(*burst, *own, return_exceptions=True)


@pytest.mark.looptime
async def test_beside_another_tenant_a_pair_goes_together_and_a_burst_one_at_a_time() -> None:
    """At the default 8, while another tenant is active: a runner's pod create and status
    write (two requests) are both in flight (a cap of 1 for every namespace cost a thousand
    scale sets' pickup p99 0.6 -> 1.2 s), while a namespace whose requests queue for a slot
    sends one at a time (with two, the fairness bench's trickle p99 was 2.0-2.5x its quiet
    value; with one, 1.6-2.1x)."""
    server = StepServer()
    kube = KubeClient(server, max_in_flight_per_namespace=8)
    other = asyncio.create_task(_send(kube, "other"))
    await _settle()
    pair = [asyncio.create_task(_send(kube, "runner")) for _ in range(2)]
    await _settle()
    assert server.in_flight["runner"] == 2
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(10)]
    await _settle()
    assert server.in_flight["burst"] == 2, "its first two found free slots"
    await server.answer(5)  # other's, the pair, the burst's first two
    assert server.in_flight["burst"] == 1
    await server.answer(1)
    assert server.in_flight["burst"] == 1
    await asyncio.gather(other, *pair)
    for task in burst:
        task.cancel()
    await asyncio.gather(*burst, return_exceptions=True)


async def test_a_cancelled_wait_gives_its_turn_on() -> None:
    limits = NamespaceInFlight(1)
    entered: list[str] = []

    async def use(name: str, hold: asyncio.Event) -> None:
        async with limits.slot("ns"):
            entered.append(name)
            await hold.wait()

    hold = asyncio.Event()
    first = asyncio.create_task(use("first", hold))
    await _settle()
    second = asyncio.create_task(use("second", hold))
    third = asyncio.create_task(use("third", hold))
    await _settle()
    second.cancel()
    hold.set()
    await asyncio.gather(first, third)
    assert entered == ["first", "third"] and limits.in_use("ns") == 0


class TimedServer:
    """A transport that answers each request after ``seconds``, recording when each began."""

    host = "https://127.0.0.1:1"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.began: dict[str, list[float]] = {}

    async def send_request(self, method: str, path: str, **_: Any) -> Any:
        ns = path.split("/namespaces/")[1].split("/")[0]
        self.began.setdefault(ns, []).append(asyncio.get_running_loop().time())
        await asyncio.sleep(self.seconds)
        return _Response()

    async def close(self) -> None:
        pass


@pytest.mark.looptime
async def test_a_backlogged_namespace_beside_another_tenant_rests_as_long_as_it_took() -> None:
    """With one request at a time, a burst still kept the API server busy all the time and
    the other tenant's pickups were 2.3x their quiet value; resting as long as each request
    took leaves the server half of its time. Only a deep backlog (a cap's worth queued)
    rests; alone, the same burst never does."""
    loop = asyncio.get_running_loop()
    server = TimedServer(seconds=1.0)
    kube = KubeClient(server, max_in_flight_per_namespace=2)  # one at a time beside others
    other = asyncio.create_task(_send(kube, "other"))
    await _settle()
    t0 = loop.time()
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(5)]
    await asyncio.gather(*burst, other)
    began = [round(t - t0, 3) for t in server.began["burst"]]
    # 1 s each; a rest of 1 s after each while 2 or more wait; the last goes without one.
    assert began == [0.0, 2.0, 4.0, 6.0, 7.0], began

    await asyncio.sleep(10)  # "other" has gone quiet for longer than the window
    server.began.clear()
    alone = [asyncio.create_task(_send(kube, "burst")) for _ in range(4)]
    await asyncio.gather(*alone)
    began = [round(t - server.began["burst"][0], 3) for t in server.began["burst"]]
    assert began == [0.0, 0.0, 1.0, 1.0], "alone, a burst has the whole cap and never rests"


@pytest.mark.looptime
async def test_a_rest_lasts_at_most_a_second() -> None:
    """A request that hung (here 5 s) must not stop its namespace for as long again."""
    server = TimedServer(seconds=5.0)
    kube = KubeClient(server, max_in_flight_per_namespace=2)
    other = asyncio.create_task(_send(kube, "other"))
    await _settle()
    t0 = asyncio.get_running_loop().time()
    burst = [asyncio.create_task(_send(kube, "burst")) for _ in range(3)]
    await asyncio.gather(*burst, other)
    began = [round(t - t0, 3) for t in server.began["burst"]]
    assert began == [0.0, 6.0, 11.0], began


async def _queued(
    slots: NamespaceInFlight, ns: str, name: str, order: list[str], **kw: Any
) -> None:
    async with slots.slot(ns, **kw):
        order.append(name)


async def test_a_status_write_waits_behind_its_namespaces_other_requests() -> None:
    """Beside another busy tenant a namespace gets 2 slots; a runner's status write queued
    before its pod create does not go first."""
    slots = NamespaceInFlight(8, rest=0)
    order: list[str] = []
    hold = asyncio.Event()

    async def held(ns: str) -> None:
        async with slots.slot(ns):
            await hold.wait()

    busy = [asyncio.create_task(held("other")), *(asyncio.create_task(held("a")) for _ in range(2))]
    for _ in range(3):
        await asyncio.sleep(0)
    status = asyncio.create_task(_queued(slots, "a", "status", order, low=True))
    await asyncio.sleep(0)
    pod = asyncio.create_task(_queued(slots, "a", "pod", order))
    await asyncio.sleep(0)
    assert order == []
    hold.set()
    await asyncio.gather(*busy, status, pod)
    assert order == ["pod", "status"]


async def test_the_client_marks_status_writes_low() -> None:
    server = SlowServer()
    kube = KubeClient(server, max_in_flight_per_namespace=8)
    seen: list[bool] = []
    real = kube._in_flight.slot  # type: ignore[union-attr]

    def spy(namespace: str, *, low: bool = False) -> Any:
        seen.append(low)
        return real(namespace, low=low)

    kube._in_flight.slot = spy  # type: ignore[union-attr,method-assign]
    server.release.set()
    path = "/apis/actions.github.com/v1alpha1/namespaces/a/ephemeralrunners/r"
    await kube._send("PATCH", path + "/status", verb="patch", label="x", body={})
    await kube._send("PATCH", path, verb="patch", label="x", body={})
    await kube._send("GET", path + "/status", verb="get", label="x")
    assert seen == [True, False, False]
