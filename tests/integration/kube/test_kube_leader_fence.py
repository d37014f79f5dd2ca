"""A held event loop against leader election, on the real API server.

The leader's reconcile holds its event loop (synchronous CPU, as a tenant's input once
did) for longer than the Lease lasts. The rival candidate runs on another thread with its
own loop and connections, as another replica would.

- The Lease is kept from its own thread: the rival never leads while the loop is held, and
  the leader's writes after the hold go through.
- When renewals cannot reach the API server as well, the rival takes over, and nothing the
  held leader tries to write after its fence deadline is sent: to the API server, nor to
  GitHub (a runner registered there by a leader that cannot store its JIT config is one
  nobody runs or deletes).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from gharc.github import ActionsClient, PersonalAccessToken
from gharc.github.config import parse_config_url
from gharc.github.models import RunnerScaleSet
from gharc.kube import errors as kerrors
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient
from gharc.kube.fence import NotLeading
from gharc.kube.leaderelection import LeaderElectionConfig, LeaderElector
from gharc.kube.manager import LeaderElectionLost, Manager
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import CONFIG_MAPS, LEASES
from testworld.sim.github import FakeGitHubServer

HOLD = 5.0
"""Seconds the reconcile holds the loop: longer than the whole Lease."""


def _election(namespace: str, identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        "gharc-fence",
        namespace,
        identity=identity,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.5,
    )


class _Sends:
    """The leader's transport, noting when each write left the process."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.host = inner.host
        self.writes: list[tuple[float, str, str]] = []

    async def send_request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method != "GET":
            self.writes.append((time.monotonic(), method, path))
        return await self.inner.send_request(method, path, **kwargs)

    def fork(self) -> Any:
        return self.inner.fork()

    async def close(self) -> None:
        await self.inner.close()


class _Holder:
    """Holds the loop on the ConfigMap ``hold``, then registers a runner at GitHub (when
    given a client and scale set) and writes ``after-hold``."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.held_until = 0.0
        self.write_error: BaseException | None = None
        self.wrote = False
        self.github: tuple[ActionsClient, int] | None = None
        self.github_error: BaseException | None = None

    async def reconcile(self, request: Request) -> Result:
        if request.name != "hold":
            return Result()
        time.sleep(HOLD)  # noqa: ASYNC251 - the point: the loop is held
        self.held_until = time.monotonic()
        if self.github is not None:
            github, scale_set_id = self.github
            try:
                await github.generate_jit_runner_config(scale_set_id, "after-hold")
            except NotLeading as err:
                self.github_error = err
        try:
            await self.kube.create(
                CONFIG_MAPS, {"metadata": {"name": "after-hold", "namespace": self.namespace}}
            )
            self.wrote = True
        except NotLeading as err:
            self.write_error = err
        return Result()


class _Rival:
    """A second replica's elector on a thread and loop of its own."""

    def __init__(self, kube: KubeClient, config: LeaderElectionConfig) -> None:
        self.kube = kube
        self.config = config
        self.led_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    async def _run(self) -> None:
        client = self.kube.fork()

        def led() -> None:
            self.led_at = time.monotonic()

        elector = LeaderElector(client, self.config, on_started_leading=led)
        task = asyncio.create_task(elector.run())
        stopped = asyncio.create_task(asyncio.to_thread(self._stop.wait))
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def _leader(
    kube: KubeClient, namespace: str
) -> tuple[Manager, _Sends, _Holder, asyncio.Task[None]]:
    sends = _Sends(kube.transport)
    client = KubeClient(sends)
    mgr = Manager(
        client,
        namespace=namespace,
        handle_signals=False,
        leader_election=_election(namespace, "first"),
    )
    holder = _Holder(client, namespace)
    Builder(mgr).named("holder").for_(CONFIG_MAPS).complete(holder)
    run = asyncio.create_task(mgr.run())
    assert await mgr.wait_leading(10)
    return mgr, sends, holder, run


async def _github_of(leader: KubeClient, holder: _Holder) -> FakeGitHubServer:
    """A fake GitHub with a scale set, and the leader's client of it behind the leader's
    fence, as the controller wires it (``write_gate``); given to ``holder``."""
    server = FakeGitHubServer(poll_timeout=0.5)
    await server.start()
    client = ActionsClient(
        parse_config_url(server.config_url()),
        PersonalAccessToken(server.token),
        write_gate=leader.write_time_left,
    )
    scale_set = await client.create_runner_scale_set(
        RunnerScaleSet(name="fence", runner_group_id=1)
    )
    assert scale_set.id is not None
    holder.github = (client, scale_set.id)
    return server


async def _close_github(holder: _Holder, server: FakeGitHubServer) -> None:
    if holder.github is not None:
        await holder.github[0].aclose()
    await server.stop()


async def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


async def test_a_held_loop_keeps_the_lease_and_no_rival_leads(
    kube: KubeClient, namespace: str
) -> None:
    mgr, _, holder, run = await _leader(kube, namespace)
    rival = _Rival(kube, _election(namespace, "second"))
    rival.start()
    try:
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "hold", "namespace": namespace}})
        assert await _wait(lambda: holder.held_until > 0, HOLD + 10)
        assert await _wait(lambda: holder.wrote or holder.write_error is not None, 5)
        assert holder.write_error is None, "the leader still leads after the hold"
        assert rival.led_at is None, "no second leader while the first held its loop"
        lease = await kube.get(LEASES, "gharc-fence", namespace=namespace)
        assert lease["spec"]["holderIdentity"] == "first"
        await kube.get(CONFIG_MAPS, "after-hold", namespace=namespace)
        assert mgr.is_leader
    finally:
        rival.stop()
        mgr.stop()
        await asyncio.gather(run, return_exceptions=True)


async def test_a_held_leader_that_cannot_renew_writes_nothing_after_its_deadline(
    kube: KubeClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr, sends, holder, run = await _leader(kube, namespace)
    github = await _github_of(mgr.client, holder)
    keeper = mgr.keeper
    assert keeper is not None and keeper.elector is not None
    cut = threading.Event()
    renew = keeper.elector._try_acquire_or_renew

    async def partitioned() -> bool:
        if cut.is_set():
            return False  # the Lease cannot be reached from the leader any more
        return await renew()

    monkeypatch.setattr(keeper.elector, "_try_acquire_or_renew", partitioned)
    rival = _Rival(kube, _election(namespace, "second"))
    rival.start()
    try:
        cut.set()
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "hold", "namespace": namespace}})
        assert await _wait(lambda: holder.held_until > 0, HOLD + 10)
        assert rival.led_at is not None and rival.led_at < holder.held_until, (
            "the rival took over while the leader's loop was held"
        )
        assert isinstance(holder.write_error, NotLeading), "the write was refused"
        deadline = keeper.elector._last_renew + keeper.config.renew_deadline
        assert deadline < rival.led_at, "the fence closed before the rival could lead"
        late = [w for w in sends.writes if w[0] >= deadline]
        assert late == [], f"writes sent after the fence deadline: {late}"
        with pytest.raises(kerrors.NotFound):
            await kube.get(CONFIG_MAPS, "after-hold", namespace=namespace)
        with pytest.raises(LeaderElectionLost):
            await asyncio.wait_for(run, 10)
        assert mgr.client.fence.refused >= 2
        assert isinstance(holder.github_error, NotLeading), "the registration was refused"
        assert github.calls("*generatejitconfig*") == 0
        assert not github.state.runners, "no runner registered at GitHub after the deadline"
    finally:
        rival.stop()
        mgr.stop()
        await asyncio.gather(run, return_exceptions=True)
        await _close_github(holder, github)
