"""The manager's endpoints, leader election and shutdown, against the real API server."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.leaderelection import LeaderElectionConfig
from gharc.kube.manager import Manager
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import CONFIG_MAPS, LEASES


class Counting:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _manager(kube: KubeClient, namespace: str, **kwargs: Any) -> tuple[Manager, Counting]:
    mgr = Manager(kube, namespace=namespace, handle_signals=False, **kwargs)
    rec = Counting()
    Builder(mgr).named(f"cm-{id(mgr)}").for_(CONFIG_MAPS).complete(rec)
    return mgr, rec


async def test_the_manager_serves_health_readiness_and_metrics(
    kube: KubeClient, namespace: str, http: aiohttp.ClientSession, eventually: Any
) -> None:
    mgr, rec = _manager(
        kube, namespace, metrics_address="127.0.0.1:0", health_address="127.0.0.1:0"
    )
    await kube.create(CONFIG_MAPS, {"metadata": {"name": "one", "namespace": namespace}})
    run = asyncio.create_task(mgr.run())
    try:
        assert await mgr.wait_started(10)
        base = f"http://127.0.0.1:{mgr.health_port}"
        async with http.get(base + "/healthz") as resp:
            assert resp.status == 200
        async with http.get(base + "/readyz") as resp:
            assert resp.status == 200
        await eventually(lambda: Request(namespace, "one") in rec.requests)
        async with http.get(f"http://127.0.0.1:{mgr.metrics_port}/metrics") as resp:
            text = await resp.text()
        assert resp.status == 200
        assert "controller_runtime_reconcile_total{" in text
        assert "workqueue_depth{" in text
        assert 'gharc_kube_api_requests_total{code="200",resource="configmaps",verb="list"}' in text
        mgr.add_readyz_check("broken", lambda: False)
        async with http.get(base + "/readyz") as resp:
            assert resp.status == 503
            assert "broken" in await resp.text()
    finally:
        mgr.stop()
        await asyncio.wait_for(run, 10)


class SlowCollector(Collector):
    """A collector that takes half a second of (blocking) time to collect."""

    def collect(self) -> Iterator[Any]:
        time.sleep(0.5)
        yield GaugeMetricFamily("slow_collector_value", "A slowly collected value.", value=1)


async def test_a_slow_scrape_does_not_hold_the_event_loop(
    kube: KubeClient, namespace: str, http: aiohttp.ClientSession
) -> None:
    """Rendering the metrics happens off the loop: a scrape of many series does not stall
    every reconcile and listener for its length."""
    registry = CollectorRegistry()
    registry.register(SlowCollector())
    mgr, _ = _manager(kube, namespace, metrics_address="127.0.0.1:0", registry=registry)
    run = asyncio.create_task(mgr.run())
    gaps: list[float] = []

    async def tick() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last)
            last = now

    try:
        assert await mgr.wait_started(10)
        ticker = asyncio.create_task(tick())
        async with http.get(f"http://127.0.0.1:{mgr.metrics_port}/metrics") as resp:
            assert "slow_collector_value 1.0" in await resp.text()
        ticker.cancel()
        assert max(gaps) < 0.3, f"the loop was held {max(gaps):.2f} s by a scrape"
    finally:
        mgr.stop()
        await asyncio.wait_for(run, 10)


async def _holder(kube: KubeClient, namespace: str, name: str) -> str | None:
    lease = await kube.get(LEASES, name, namespace=namespace)
    return (lease.get("spec") or {}).get("holderIdentity")


async def test_two_managers_elect_one_leader_and_the_other_takes_over_when_it_stops(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    def election(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            "gharc-test",
            namespace,
            identity=identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
        )

    first, rec1 = _manager(kube, namespace, leader_election=election("first"))
    second, rec2 = _manager(kube, namespace, leader_election=election("second"))
    await kube.create(CONFIG_MAPS, {"metadata": {"name": "work", "namespace": namespace}})
    run1 = asyncio.create_task(first.run())
    assert await first.wait_leading(10)
    run2 = asyncio.create_task(second.run())
    try:
        assert await second.wait_started(10)
        await eventually(lambda: Request(namespace, "work") in rec1.requests)
        await asyncio.sleep(2.0)  # several renewals; the follower must stay a follower
        assert first.is_leader and not second.is_leader
        assert rec2.requests == [], "a follower's controllers do not run"
        assert await _holder(kube, namespace, "gharc-test") == "first"

        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        first.stop()
        await asyncio.wait_for(run1, 10)
        assert await second.wait_leading(3.0 + 1.0), "takeover within the lease duration"
        assert loop.time() - stopped_at < 3.0 + 1.0
        await eventually(lambda: Request(namespace, "work") in rec2.requests)
        lease = await kube.get(LEASES, "gharc-test", namespace=namespace)
        assert lease["spec"]["holderIdentity"] == "second"
        assert lease["spec"]["leaseTransitions"] >= 1
        renew = datetime.datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
        age = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - renew
        assert abs(age.total_seconds()) < 5, "renewTime is UTC"
    finally:
        first.stop()
        second.stop()
        await asyncio.gather(run1, run2, return_exceptions=True)
    assert await _holder(kube, namespace, "gharc-test") is None, "released on shutdown"


async def test_a_crashed_leader_is_replaced_after_the_lease_expires(
    kube: KubeClient, namespace: str
) -> None:
    """No release (the process died): the follower waits out the lease, then takes over."""
    config = dict(lease_duration=2.0, renew_deadline=1.5, retry_period=0.25)
    first, _ = _manager(
        kube,
        namespace,
        leader_election=LeaderElectionConfig(
            "gharc-crash", namespace, identity="first", release_on_cancel=False, **config
        ),
    )
    second, _ = _manager(
        kube,
        namespace,
        leader_election=LeaderElectionConfig("gharc-crash", namespace, identity="second", **config),
    )
    run1 = asyncio.create_task(first.run())
    assert await first.wait_leading(10)
    run2 = asyncio.create_task(second.run())
    try:
        assert await second.wait_started(10)
        first.stop()
        await asyncio.wait_for(run1, 10)
        assert await _holder(kube, namespace, "gharc-crash") == "first", "not released"
        assert not await second.wait_leading(1.0), "must wait out the lease"
        assert await second.wait_leading(2.0 + 2.0)
    finally:
        second.stop()
        await asyncio.gather(run1, run2, return_exceptions=True)


async def test_losing_the_lease_stops_the_controllers_and_run_raises(
    kube: KubeClient, namespace: str
) -> None:
    from gharc.kube.manager import LeaderElectionLost

    mgr, _ = _manager(
        kube,
        namespace,
        leader_election=LeaderElectionConfig(
            "gharc-lost",
            namespace,
            identity="me",
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.25,
        ),
    )
    run = asyncio.create_task(mgr.run())
    assert await mgr.wait_leading(10)
    lease = await kube.get(LEASES, "gharc-lost", namespace=namespace)
    await kube.merge_patch(
        LEASES, lease, {"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}}
    )
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(run, 10)
    assert not mgr.is_leader
