"""Chaos cases of one tenant against another in the shared controller (issue 26).

In-process listeners all live in the elected controller, so what one tenant writes in its
AutoscalingRunnerSet is spent there. Like :mod:`.cases`, each case builds its own World and
returns a :class:`~testworld.chaos.report.CaseResult` measured from the outside (the
fake GitHub, the API server, the controller's metrics endpoint as Prometheus scrapes it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from gharc.listener.metric_limits import OTHER
from testworld.chaos.cases import SHORT_POLL, SMALL, Sizes, burst, start_scale_sets
from testworld.chaos.measure import outcome
from testworld.chaos.replicas import leader
from testworld.chaos.report import CaseResult
from testworld.sim.github.state import Job
from testworld.world import World
from testworld.worlds import REPO, WorldFactory, wait_until

LEASE = "gharc-chaos-tenants"
#: The hostile config of issue 26: 20,000 buckets in each job histogram.
HOSTILE_BUCKETS = 20_000
#: A low label bound, so that a few dozen jobs (each needs a runner) cross it.
LABEL_VALUES = 10
HOSTILE_JOBS = 30
#: A scrape this slow is a failure whatever it returns (Prometheus' default is 10 s).
SCRAPE_TIMEOUT = 30.0


def hostile_metrics(buckets: int = HOSTILE_BUCKETS) -> dict[str, Any]:
    """``listenerMetrics`` with ARC's job histograms and ``buckets`` buckets in each."""
    labels = ["repository", "job_name", "event_name"]
    bounds = [float(i + 1) for i in range(buckets)]
    return {
        "counters": {"gha_started_jobs_total": {"labels": labels}},
        "histograms": {
            name: {"labels": labels, "buckets": bounds}
            for name in (
                "gha_job_startup_duration_seconds",
                "gha_job_execution_duration_seconds",
                "gha_job_queue_duration_seconds",
            )
        },
    }


async def scrape(world: World) -> tuple[str, float]:
    """The controller's metrics endpoint as Prometheus reads it, and how long it took."""
    url = f"http://127.0.0.1:{world.metrics_port}/metrics"
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as resp:
            text = await resp.text()
    except TimeoutError:  # the table says so (before issue 26's bounds: over a minute)
        text = ""
    return text, time.monotonic() - started


def job_samples(text: str, prefix: str) -> list[Any]:
    """The ``gha_*`` samples of jobs named ``prefix...`` (or folded into ``other``): ARC's
    job labels carry no scale set name, so the hostile tenant's jobs are told by name."""
    return [
        s
        for fam in text_string_to_metric_families(text)
        if fam.name.startswith("gha_")
        for s in fam.samples
        if s.labels.get("job_name", "").startswith(prefix) or s.labels.get("job_name") == OTHER
    ]


def rss_mib(world: World) -> float | None:
    """The controller process's resident memory (``VmRSS``), MiB; None when it is gone."""
    proc = world.controller
    if proc is None:
        return None
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
    except OSError:
        return None
    kib = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")), 0)
    return round(kib / 1024, 1)


async def limit_events(world: World, namespace: str) -> list[tuple[str, int]]:
    """(message, count) of the ListenerMetricsLimited events in ``namespace``."""
    events = await world.core.list_namespaced_event(namespace)
    return [
        (e.message or "", int(e.count or 1))
        for e in events.items
        if e.reason == "ListenerMetricsLimited"
    ]


async def hostile_metrics_tenant(
    factory: WorldFactory, namespace: str, sizes: Sizes = SMALL
) -> CaseResult:
    """A tenant's scale set asks for 20,000 buckets and runs jobs of 30 distinct names,
    while another tenant's scale set runs its jobs. The controller keeps its Lease, no job
    waits for a runner, the scrape stays small and each bound reached is one event."""
    ns = namespace
    world = await factory.create(
        ns,
        poll_timeout=SHORT_POLL,
        controller_args=[
            "--enable-leader-election",
            f"--leader-election-id={LEASE}",
            "--listener-metrics-addr=:8080",  # served by the controller: in process
            f"--listener-metrics-max-label-values={LABEL_VALUES}",
        ],
        controller_env={"POD_NAME": "tenants"},
    )
    hostile, victim = "tn-hostile", "tn-victim"
    await start_scale_sets(world, ns, [victim], sizes)
    await world.apply_scale_set(
        ns, hostile, max_runners=2 * sizes.max_runners, listener_metrics=hostile_metrics()
    )
    await world.wait_for_listener(hostile, timeout=90)
    rss_before = rss_mib(world)
    t0 = time.time()
    hostile_jobs: list[Job] = [
        world.github.enqueue_job(REPO, [hostile], duration=0.2, job_name=f"job-{i}")
        for i in range(HOSTILE_JOBS)
    ]
    victim_jobs = burst(world, [victim], sizes.jobs + sizes.after, 1500, sizes)
    result = await outcome(
        world,
        "hostile-metrics",
        hostile_jobs + victim_jobs,
        namespace=ns,
        scale_sets=[hostile, victim],
    )
    rss_after = rss_mib(world)
    text, scrape_s = await scrape(world)
    samples = job_samples(text, "job-")
    names = {s.labels["job_name"] for s in samples}

    async def said() -> bool:
        return any("job_name" in m for m, _ in await limit_events(world, ns))

    try:
        await wait_until(said, 30, "the label bound to be an event", world=world)
    except AssertionError as err:  # the table still shows what the case saw
        result.extra["error"] = str(err)
    events = await limit_events(world, ns)
    holder = await leader(world, LEASE)
    world.check_controller()  # raises when the controller exited
    result.recover_seconds = None
    result.extra.update(
        leader=holder,
        scrape_s=round(scrape_s, 2),
        rss_mib=f"{rss_before} -> {rss_after}",
        scrape_bytes=len(text),
        hostile_samples=len(samples),
        job_name_values=len(names),
        other_counted="other" in names,
        limit_events=len(events),
        limit_event_repeats=sum(count - 1 for _, count in events),
        victim_never_got_runner=sum(1 for j in victim_jobs if j.runner_assign_time is None),
        window_s=round(time.time() - t0, 1),
    )
    return result


HOSTILE_METRICS = {"hostile-metrics": hostile_metrics_tenant}
