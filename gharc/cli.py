"""The single ``gharc`` entry point.

Every subcommand imports its implementation lazily, so ``gharc crds`` does not pay for the
controller's imports and a broken optional module cannot take the whole CLI down.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="gharc",
    help="Ephemeral, autoscaling GitHub Actions runners on Kubernetes (ARC-compatible).",
    no_args_is_help=True,
    add_completion=False,
)
sim_app = typer.Typer(help="The local test world: fake GitHub, kubelet and runner simulator.")
app.add_typer(sim_app, name="sim")


@app.command()
def version() -> None:
    """Print gharc's version."""
    from gharc import __version__

    typer.echo(__version__)


@app.command()
def crds(
    group: str = typer.Option(
        "all", "--group", help="Which CRDs: scaleset (actions.github.com), legacy, or all."
    ),
) -> None:
    """Print gharc's CRD manifests as one YAML stream, for `kubectl apply -f -`."""
    from gharc.api import crds as crd_manifests

    if group not in ("scaleset", "legacy", "all"):
        raise typer.BadParameter("expected scaleset, legacy or all", param_hint="--group")
    typer.echo(crd_manifests.dump(crd_manifests.load(group)), nl=False)


@app.command()
def listener(
    config: str | None = typer.Option(
        None,
        "--config",
        help="Path of config.json (default: $LISTENER_CONFIG_PATH, else "
        "/etc/gha-listener/config.json). GHARC_LISTENER_<KEY> env vars override keys.",
    ),
) -> None:
    """Run the scale set listener for one AutoscalingRunnerSet (the listener pod's command)."""
    from gharc.listener.__main__ import main as listener_main

    raise typer.Exit(listener_main(config))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def controller(ctx: typer.Context) -> None:
    """Run the scale set controllers (ARC's flags; `gharc controller --help` lists them)."""
    from gharc.controllers.main import main as controller_main

    raise typer.Exit(controller_main(list(ctx.args)))


@app.command(
    "webhook-server",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def webhook_server(ctx: typer.Context) -> None:
    """Run the legacy workflow_job webhook server (ARC's flags; `--help` lists them)."""
    from gharc.webhook.main import main as webhook_main

    raise typer.Exit(webhook_main(list(ctx.args)))


@sim_app.command("github")
def sim_github(
    port: int = typer.Option(8080, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    poll_timeout: float = typer.Option(
        50.0, "--poll-timeout", help="Seconds a message long poll is held open."
    ),
) -> None:
    """Run the fake GitHub (REST, Actions service, runner API); prints its URL and a PAT."""
    from gharc.sim.github.cli import run

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

    from gharc.demo import DemoOptions, run

    if mode not in ("scaleset", "legacy"):
        raise typer.BadParameter("expected scaleset or legacy", param_hint="--mode")
    if mode == "legacy" and faults:
        raise typer.BadParameter(
            "--faults is available in scale set mode only", param_hint="--mode"
        )
    if mode == "legacy":
        from gharc.demo_legacy import run as run_legacy

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
    jobs: int = typer.Option(1000, help="Jobs in the run."),
    scale_sets: int = typer.Option(20, help="Scale sets (one namespace each, one controller)."),
    max_runners: int = typer.Option(10, help="maxRunners of every scale set."),
    rate: float = typer.Option(10.0, help="Job arrivals per second, over all scale sets."),
    job_seconds: str = typer.Option("0.5-2", help="Job durations: MIN-MAX seconds."),
    poll_timeout: float = typer.Option(50.0, help="The fake GitHub's message long poll (s)."),
    seed: int = typer.Option(42, help="Seed of the arrivals (same seed, same workload)."),
    timeout: float = typer.Option(900.0, help="Give up on the run after this many seconds."),
    out: str = typer.Option("", help="Folder for bench.json and the logs (default: /tmp)."),
) -> None:
    """Benchmark the whole system: pickup latency, runners and API calls per job, CPU, RSS."""
    from pathlib import Path

    from gharc.bench import BenchOptions, run

    lo, _, hi = job_seconds.partition("-")
    options = BenchOptions(
        jobs=jobs,
        scale_sets=scale_sets,
        max_runners=max_runners,
        rate=rate,
        job_seconds=(float(lo), float(hi or lo)),
        poll_timeout=poll_timeout,
        seed=seed,
        timeout=timeout,
        out=Path(out) if out else None,
    )
    raise typer.Exit(run(options))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
