"""The in-process listener host: isolation, B1's ladder per listener, takeover on restart.

Time is virtual (looptime): backoffs of 5, 10, 20 s cost nothing, and every assertion about
when something happened is about loop time, not the machine's speed.
"""

from __future__ import annotations

import asyncio
import functools
import time
from types import SimpleNamespace
from typing import Any

import pytest
from listener_fakes import FakeActions, FakePatcher, config, message

from gharc.github import errors as gherrors
from gharc.kube.shardfence import CURRENT_SHARD, ShardFences, acting_for
from gharc.listener.config import MetricsConfig
from gharc.listener.host import PHASE_BACKOFF, PHASE_RUNNING, ListenerHost
from gharc.listener.metrics import ListenerMetrics, default_metrics_config
from testworld.wait import eventually

pytestmark = pytest.mark.looptime


class HostedFake(FakePatcher):
    """A FakePatcher with the host's extras: cleanup markers and a session record."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__()
        self.namespace = namespace
        self.runner_set_name = name
        self.recorded: str | None = None
        self.recorded_for: int | None = None
        """The shard the code that recorded the session acted for."""
        self.markers: asyncio.Queue[int] = asyncio.Queue()

    def offer(self, marker: int) -> None:
        self.markers.put_nowait(marker)

    async def recorded_session(self) -> str | None:
        return self.recorded

    async def record_session(self, session_id: str | None) -> None:
        self.recorded = session_id
        self.recorded_for = CURRENT_SHARD.get()


class World:
    def __init__(self, kube: Any = None) -> None:
        self.patchers: dict[str, HostedFake] = {}
        self.changes: list[tuple[str, str]] = []
        self.host = ListenerHost(
            kube,
            identity="controller-0",
            ladder=(5.0, 10.0, 20.0),
            stable_after=10.0,
            on_change=self.changes.append,
            patcher_factory=self._patcher,
        )

    def _patcher(self, namespace: str, name: str) -> HostedFake:
        patcher = self.patchers.setdefault(name, HostedFake(namespace, name))
        return patcher

    def start(
        self,
        name: str,
        api: Any,
        fingerprint: str = "v1",
        metrics_config: MetricsConfig | None = None,
        **cfg: Any,
    ) -> None:
        async def resolve(fresh: bool) -> Any:
            if isinstance(api, BaseException):
                raise api
            metrics = ListenerMetrics(name=name, namespace="ns", config=metrics_config)
            return config(ephemeral_runner_set_name=name, **cfg), api, metrics

        self.host.ensure(("ctl", name), ("ns", name), fingerprint, resolve)


def revoked() -> gherrors.Unauthorized:
    return gherrors.Unauthorized("Bad credentials", status=401)


#: The shared helper with backoff-sized defaults (loop time, see the module docstring).
_until = functools.partial(eventually, timeout=300.0, interval=0.5)


async def test_revoked_credentials_back_off_alone_while_the_healthy_listener_scales() -> None:
    world = World()
    good, bad = FakeActions(), FakeActions()
    bad.create_errors = [revoked() for _ in range(10)]
    world.start("good", good)
    world.start("bad", bad)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await _until(lambda: world.host.status(("ctl", "bad")).failures >= 3)  # type: ignore[union-attr]
    # B1's ladder for this listener alone: failures at ~0, 5, 15 s (5 then 10 s apart).
    assert 14.0 <= loop.time() - began <= 16.0
    bad_state = world.host.status(("ctl", "bad"))
    assert bad_state is not None and bad_state.phase == PHASE_BACKOFF
    assert "credentials" in bad_state.message
    # Meanwhile the healthy one got its session and scales at once on a message.
    good.queue.put_nowait(message(1, [], assigned=3))
    await _until(
        lambda: (
            (3, 1) in world.patchers["good"].replicas
            or any(r == 3 for r, _ in world.patchers["good"].replicas)
        ),
        timeout=5,
    )
    good_state = world.host.status(("ctl", "good"))
    assert good_state is not None and good_state.phase == PHASE_RUNNING
    assert good_state.failures == 0 and good_state.session_id
    await world.host.stop()


async def test_a_crash_in_one_listener_is_contained_and_reported() -> None:
    world = World()
    world.start("broken", RuntimeError("boom in resolve"))
    healthy = FakeActions()
    world.start("healthy", healthy)
    await _until(lambda: world.host.status(("ctl", "broken")).failures >= 1)  # type: ignore[union-attr]
    state = world.host.status(("ctl", "broken"))
    assert state is not None
    assert state.phase == PHASE_BACKOFF and "RuntimeError: boom in resolve" in state.message
    assert state.restart_at is not None and state.last_failure_time is not None
    assert ("ctl", "broken") in world.changes  # the reconciler is told
    await _until(lambda: bool(world.patchers["healthy"].replicas), timeout=5)
    await world.host.stop()


async def test_failure_count_resets_after_the_listener_ran_stably() -> None:
    world = World()
    api = FakeActions()
    api.create_errors = [revoked(), revoked()]
    world.start("flaky", api)
    await _until(lambda: world.host.status(("ctl", "flaky")).phase == PHASE_RUNNING)  # type: ignore[union-attr]
    assert world.host.status(("ctl", "flaky")).failures == 2  # type: ignore[union-attr]
    await asyncio.sleep(11)
    api.queue.put_nowait(message(1, [], assigned=1))
    await _until(lambda: world.host.status(("ctl", "flaky")).failures == 0, timeout=5)  # type: ignore[union-attr]
    await world.host.stop()


async def test_new_settings_restart_the_listener_which_resumes_its_session() -> None:
    world = World()
    api = FakeActions()
    world.start("set", api, max_runners=10)
    await _until(lambda: world.patchers["set"].recorded is not None)
    first = world.patchers["set"].recorded
    world.start("set", api, fingerprint="v2", max_runners=2)
    # (A message queued while the old poll is being cancelled would be lost in this
    # in-memory fake; the real queue redelivers what was not deleted.)
    await _until(lambda: ("refresh", first) in api.calls and api.calls[-1][0] == "get")
    api.queue.put_nowait(message(1, [], assigned=5))
    await _until(lambda: any(r == 2 for r, _ in world.patchers["set"].replicas), timeout=10)
    assert ("refresh", first) in api.calls  # resumed, not re-created
    assert api.sessions_created == 1 and api.deleted_sessions == []
    await world.host.stop()


async def test_stop_keeps_sessions_for_the_successor_and_remove_deletes_them() -> None:
    world = World()
    kept, removed = FakeActions(), FakeActions()
    world.start("kept", kept)
    world.start("removed", removed)
    await _until(
        lambda: len(world.patchers) == 2 and all(p.recorded for p in world.patchers.values())
    )
    await world.host.remove(("ctl", "removed"))
    assert removed.deleted_sessions == ["s1"] and world.patchers["removed"].recorded is None
    await world.host.stop()
    assert kept.deleted_sessions == [] and world.patchers["kept"].recorded == "s1"
    assert len(world.host) == 0


async def test_giving_a_shard_away_stops_its_listeners_and_keeps_their_sessions() -> None:
    world = World()
    apis = {name: FakeActions() for name in ("a", "b", "c")}
    shards = {"a": 1, "b": 2, "c": 1}
    for name, api in apis.items():
        with acting_for(shards[name]):
            world.start(name, api)
    await _until(
        lambda: len(world.patchers) == 3 and all(p.recorded for p in world.patchers.values())
    )
    # Each listener's task acts for the shard it was started for: its writes are fenced so.
    assert {n: world.patchers[n].recorded_for for n in apis} == shards
    assert await world.host.drop_shard(1) == 2
    assert world.host.keys() == [("ctl", "b")]
    assert all(apis[n].deleted_sessions == [] for n in ("a", "c"))
    assert world.patchers["a"].recorded == "s1" and world.patchers["c"].recorded == "s1"
    assert await world.host.drop_shard(1) == 0
    await world.host.stop()


async def test_a_closed_shard_fence_keeps_the_listener_off_github() -> None:
    """A replica that cannot prove it holds a shard (its loop stalled past the Lease) sends
    no GitHub call for that shard's listeners: no session taken, no job acquired, nothing
    deleted; once the fence opens the listener goes on."""
    fences = ShardFences(2)  # armed: closed until a Lease write opens them
    world = World(kube=SimpleNamespace(shard_fences=fences))
    fenced_api, free_api = FakeActions(), FakeActions()
    with acting_for(1):
        world.start("fenced", fenced_api)
    world.start("free", free_api)  # started outside any shard: not fenced
    await asyncio.sleep(30)
    assert fenced_api.sessions_created == 0 and fenced_api.calls == []
    assert free_api.sessions_created == 1
    fenced_state = world.host.status(("ctl", "fenced"))
    assert fenced_state is not None and fenced_state.phase != PHASE_RUNNING
    fences[1].extend_to(time.monotonic() + 3600)
    await _until(lambda: fenced_api.sessions_created == 1)
    await world.host.stop()


async def test_release_on_stop_deletes_every_session_and_record_even_in_backoff() -> None:
    """Stopping for good: the running listener closes its session; one waiting in backoff
    (its loop failed, its session left recorded for a successor) has it deleted by the host."""
    world = World()
    world.host.release_on_stop = True
    released: list[tuple[tuple[str, str], str]] = []

    async def on_released(runner_set: tuple[str, str], session_id: str) -> None:
        released.append((runner_set, session_id))

    world.host.on_released = on_released
    running, failing = FakeActions(), FakeActions()
    world.start("running", running)
    world.start("failing", failing)
    await _until(
        lambda: len(world.patchers) == 2 and all(p.recorded for p in world.patchers.values())
    )
    failing.queue.put_nowait(revoked())
    await _until(lambda: world.host.status(("ctl", "failing")).phase == PHASE_BACKOFF)
    assert world.patchers["failing"].recorded == "s1" and failing.deleted_sessions == []
    await world.host.stop()
    assert running.deleted_sessions == ["s1"]
    assert failing.deleted_sessions == ["s1"]
    assert world.patchers["running"].recorded is None
    assert world.patchers["failing"].recorded is None
    assert sorted(released) == [(("ns", "failing"), "s1"), (("ns", "running"), "s1")]


async def test_a_lost_lease_keeps_the_sessions_even_with_release_on_stop() -> None:
    """The new leader may have resumed them already: releasing would cost it a session."""
    world = World()
    world.host.release_on_stop = True
    world.host.release_allowed = lambda: False
    api = FakeActions()
    world.start("kept", api)
    await _until(lambda: bool(world.patchers) and bool(world.patchers["kept"].recorded))
    await world.host.stop()
    assert api.deleted_sessions == [] and world.patchers["kept"].recorded == "s1"


async def test_metric_limits_are_handed_to_the_reconciler_once_across_restarts() -> None:
    """20,000 buckets are cut when each (re)start builds the metrics; the reconciler gets
    each cut once, and a label folded later once, so a tenant's config is one event each."""
    from test_metric_limits import started

    world = World()
    hostile = default_metrics_config()
    for hist in hostile.histograms.values():
        hist.buckets = [float(i + 1) for i in range(20_000)]
    api = FakeActions()
    api.create_errors = [revoked()]  # one failure: the metrics are built twice
    world.start("tenant", api, metrics_config=hostile)
    key = ("ctl", "tenant")
    await _until(lambda: world.host.status(key).phase == PHASE_RUNNING)  # type: ignore[union-attr]
    notices = world.host.take_notices(key)
    assert len(notices) == 3 and all("20000 buckets" in n for n in notices), notices
    assert world.host.take_notices(key) == []
    (metrics,) = list(world.host.metrics())
    for i in range(300):
        metrics.record_job_started(started(f"job-{i}"))
    folded = world.host.take_notices(key)
    assert len([n for n in folded if "job_name" in n]) == 1 and len(folded) <= 2, folded
    for i in range(300, 400):
        metrics.record_job_started(started(f"job-{i}"))
    assert world.host.take_notices(key) == []
    assert key in world.changes
    await world.host.stop()


async def test_the_last_message_time_is_reported_after_the_job_and_at_most_a_minute_apart() -> None:
    """A message's report is a status write: it waits out the job the message brought (a
    quiet set's first message is a job whose runner is being made), carries the newest
    message's time, and comes at most once a minute however busy the set."""
    world = World()
    api = FakeActions()
    world.start("set", api)
    key = ("ctl", "set")
    await _until(lambda: world.host.status(key).phase == PHASE_RUNNING)  # type: ignore[union-attr]
    await asyncio.sleep(1)
    world.changes.clear()
    loop = asyncio.get_running_loop()
    began = loop.time()
    api.queue.put_nowait(message(1, [], assigned=1))
    api.queue.put_nowait(message(2, [], assigned=0))
    await _until(lambda: api.deleted_messages == [1, 2], timeout=5)
    await asyncio.sleep(5)
    assert world.changes == [], "reported while the message's job was being picked up"
    await _until(lambda: key in world.changes, timeout=30)
    assert 9.5 <= loop.time() - began <= 11.0
    reported = world.host.status(key)
    assert reported is not None and reported.last_message_time is not None
    world.changes.clear()
    api.queue.put_nowait(message(3, [], assigned=1))
    await _until(lambda: api.deleted_messages == [1, 2, 3], timeout=5)
    await _until(lambda: key in world.changes, timeout=120)
    assert 69.5 <= loop.time() - began <= 71.5, "reported again within a minute"
    await world.host.stop()
