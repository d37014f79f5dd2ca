"""``python -m testworld``: the test world's own commands (demo, benchmarks, the fake GitHub).

They live outside the ``gharc`` package so that the product's wheel and image carry the
product alone; ``gharc`` keeps ``controller``, ``listener``, ``webhook-server``, ``release``,
``crds`` and ``version``.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="testworld",
    help="gharc's local test world: the demo, the benchmarks and the fake GitHub.",
    no_args_is_help=True,
    add_completion=False,
)
sim_app = typer.Typer(help="The simulators on their own: the fake GitHub.")
app.add_typer(sim_app, name="sim")


@sim_app.command("github")
def sim_github(
    port: int = typer.Option(8080, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    poll_timeout: float = typer.Option(
        50.0, "--poll-timeout", help="Seconds a message long poll is held open."
    ),
) -> None:
    """Run the fake GitHub (REST, Actions service, runner API); prints its URL and a PAT."""
    from testworld.sim.github.cli import run

    run(host, port, poll_timeout)


@app.command()
def demo(
    workload: str = typer.Option(
        "burst=0:20,burst=40:30,trickle=30/60,jobs=2-8,failures=0.05",
        help="Job arrivals: burst=AT:N, trickle=PER_MIN/SECONDS, jobs=MIN-MAX, failures=RATE, "
        "seed=N (comma-separated).",
    ),
    min_runners: int = typer.Option(0, help="minRunners of the demo scale set."),
    max_runners: int = typer.Option(50, help="maxRunners of the demo scale set."),
    faults: bool = typer.Option(False, help="Mix in busy-runner evictions and a listener crash."),
    out: str = typer.Option("demo-output", help="Folder for the report (HTML, PNG, JSON, logs)."),
    timeout: float = typer.Option(600.0, help="Give up after this many seconds."),
    mode: str = typer.Option(
        "scaleset",
        help="scaleset (AutoscalingRunnerSet + listener) or legacy (RunnerDeployment + "
        "HorizontalRunnerAutoscaler scaled by workflow_job webhooks).",
    ),
) -> None:
    """Run the whole system locally: control plane, fake GitHub, controller, a workload."""
    from pathlib import Path

    from testworld.demo import DemoOptions, run

    if mode not in ("scaleset", "legacy"):
        raise typer.BadParameter("expected scaleset or legacy", param_hint="--mode")
    if mode == "legacy" and faults:
        raise typer.BadParameter(
            "--faults is available in scale set mode only", param_hint="--mode"
        )
    if mode == "legacy":
        from testworld.demo_legacy import run as run_legacy

        run = run_legacy
    options = DemoOptions(
        workload=workload,
        min_runners=min_runners,
        max_runners=max_runners,
        faults=faults,
        out_dir=Path(out),
        timeout=timeout,
    )
    raise typer.Exit(run(options))


@app.command()
def bench(
    suite: str = typer.Option(
        "jobs",
        help="jobs: the whole system under a job stream; listeners: what a listener costs "
        "in-process and as a pod, at several scale set counts; scale: one controller with "
        "in-process listeners at --sizes scale sets (default 1,100,1000): time to sessions, "
        "RSS, idle CPU, loop lag, pickup; fairness: one tenant's trickle while another's "
        "--burst lands; shards: --scale-sets (default 3,000) over --replicas sharded replicas, "
        "one SIGKILLed (bench/README.md).",
    ),
    jobs: int | None = typer.Option(None, help="Jobs in a run (jobs: 1000, listeners: 200)."),
    scale_sets: int = typer.Option(
        20, help="Scale sets (one namespace each, one controller; shards suite: 3,000)."
    ),
    max_runners: int = typer.Option(10, help="maxRunners of every scale set."),
    rate: float | None = typer.Option(
        None, help="Job arrivals per second, over all scale sets (jobs: 10, listeners: 5)."
    ),
    job_seconds: str | None = typer.Option(
        None, help="Job durations: MIN-MAX seconds (jobs: 0.5-2, listeners: 0.5-1)."
    ),
    poll_timeout: float = typer.Option(50.0, help="The fake GitHub's message long poll (s)."),
    seed: int = typer.Option(42, help="Seed of the arrivals (same seed, same workload)."),
    timeout: float = typer.Option(
        900.0, help="Give up on a run's workload after this many seconds (listeners: 240)."
    ),
    out: str = typer.Option("", help="Folder for the JSON results and the logs (default: /tmp)."),
    listener_mode: str = typer.Option(
        "InProcess", help="jobs suite: the controller's --listener-mode (InProcess or Pod)."
    ),
    sizes: str = typer.Option(
        "1,10,50,200", help="listeners and scale suites: in-process scale set counts."
    ),
    pod_sizes: str = typer.Option(
        "1,10,50", help="listeners suite: pod-mode scale set counts (one process per listener)."
    ),
    modes: str = typer.Option("InProcess,Pod", help="listeners suite: listener modes to run."),
    idle_seconds: float = typer.Option(
        15.0,
        help="listeners and scale suites: the idle window (RSS, idle CPU); the scale suite's "
        "default is a whole long poll (--poll-timeout + 10 s).",
    ),
    settle_seconds: float = typer.Option(
        30.0, help="listeners and scale suites: wait after the last session before idle CPU."
    ),
    burst: int = typer.Option(
        400, help="jobs suite: runner pods requested at once after the job stream (0: skip)."
    ),
    replicas: int = typer.Option(3, help="shards suite: controller replicas."),
    shards: int = typer.Option(12, help="shards suite: the controllers' --shards."),
    controller_args: str = typer.Option(
        "", help="fairness suite: extra controller flags, as one shell-quoted string."
    ),
    idle_samples: int = typer.Option(
        10, help="jobs suite: single-replica patches timed to their pod when idle (0: skip)."
    ),
    limit_range: bool = typer.Option(
        False, help="scale suite: a LimitRange (PVCs only) in every scale set's namespace."
    ),
    rounds: int = typer.Option(
        4, help="fairness suite: quiet + burst rounds, pooled (30 trickle jobs a phase each)."
    ),
) -> None:
    """Benchmark the whole system: pickup latency, runners and API calls per job, CPU, RSS."""
    import shlex
    from pathlib import Path

    if listener_mode not in ("InProcess", "Pod"):
        raise typer.BadParameter("expected InProcess or Pod", param_hint="--listener-mode")
    if suite == "shards":
        from testworld.bench_shards import ShardBenchOptions
        from testworld.bench_shards import run as run_shards

        raise typer.Exit(
            run_shards(
                ShardBenchOptions(
                    scale_sets=scale_sets if scale_sets != 20 else 3000,
                    replicas=replicas,
                    shards=shards,
                    jobs=jobs if jobs is not None else 100,
                    poll_timeout=poll_timeout if poll_timeout != 50.0 else 20.0,
                    out=Path(out) if out else None,
                )
            )
        )
    if suite == "fairness":
        from testworld.bench_fairness import FairnessOptions
        from testworld.bench_fairness import run as run_fairness

        raise typer.Exit(
            run_fairness(
                FairnessOptions(
                    burst=burst,
                    trickle_jobs=jobs or 30,
                    rate=rate or 1.0,
                    rounds=rounds,
                    poll_timeout=poll_timeout,
                    timeout=timeout,
                    out=Path(out) if out else None,
                    controller_args=shlex.split(controller_args),
                )
            )
        )
    if suite in ("listeners", "scale"):
        from testworld.bench_listeners import MODES, ListenerBenchOptions
        from testworld.bench_listeners import run as run_listeners

        if suite == "scale":  # one controller, in-process listeners, many scale sets
            modes = "InProcess"
            sizes = sizes if sizes != "1,10,50,200" else "1,100,1000"
            # A whole long-poll cycle: every listener's poll returns once inside the window.
            idle_seconds = idle_seconds if idle_seconds != 15.0 else poll_timeout + 10.0
            # Pickup at a fixed rate, not waits for a free runner: with 10, one set's share of
            # a burst of the stream waits for runners to finish (1.2 s at seed 42, t=103 s).
            max_runners = max_runners if max_runners != 10 else 50
        chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
        if not chosen or any(m not in MODES for m in chosen):
            raise typer.BadParameter("expected InProcess and/or Pod", param_hint="--modes")
        lo, _, hi = (job_seconds or "0.5-1").partition("-")
        listener_options = ListenerBenchOptions(
            sizes=_counts(sizes, "--sizes"),
            pod_sizes=_counts(pod_sizes, "--pod-sizes"),
            modes=chosen,
            jobs=jobs or 200,
            rate=rate or 5.0,
            job_seconds=(float(lo), float(hi or lo)),
            max_runners=max_runners,
            idle_seconds=idle_seconds,
            settle_seconds=settle_seconds,
            run_timeout=min(timeout, 240.0),
            poll_timeout=poll_timeout,
            limit_range=limit_range,
            seed=seed,
            out=Path(out) if out else None,
        )
        raise typer.Exit(run_listeners(listener_options, suite=suite))
    if suite != "jobs":
        raise typer.BadParameter(
            "expected jobs, listeners, scale, fairness or shards", param_hint="--suite"
        )

    from testworld.bench import BenchOptions, run

    lo, _, hi = (job_seconds or "0.5-2").partition("-")
    options = BenchOptions(
        jobs=jobs or 1000,
        scale_sets=scale_sets,
        max_runners=max_runners,
        rate=rate or 10.0,
        job_seconds=(float(lo), float(hi or lo)),
        poll_timeout=poll_timeout,
        seed=seed,
        timeout=timeout,
        out=Path(out) if out else None,
        listener_mode=listener_mode,
        burst=burst,
        idle_samples=idle_samples,
    )
    raise typer.Exit(run(options))


def _counts(text: str, hint: str) -> tuple[int, ...]:
    """``"1,10,50"`` -> ``(1, 10, 50)``; every count at least 1."""
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        counts = ()
    if any(n < 1 for n in counts):
        counts = ()
    if not counts and text.strip():
        raise typer.BadParameter("expected comma-separated counts >= 1", param_hint=hint)
    return counts


def main() -> None:
    app()
