"""The ``gharc`` subcommands (typer), behind :mod:`gharc.cli`'s entry point.

Every subcommand imports its implementation lazily, so ``gharc crds`` does not pay for the
controller's imports and a broken optional module cannot take the whole CLI down. ``gharc
listener`` with at most ``--config`` does not come here at all (see :func:`gharc.cli.main`).
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="gharc",
    help="Ephemeral, autoscaling GitHub Actions runners on Kubernetes (ARC-compatible).",
    no_args_is_help=True,
    add_completion=False,
)


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


@app.command()
def release(
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", help="Only this namespace's scale sets (default: all)."
    ),
    kubeconfig: str | None = typer.Option(
        None,
        "--kubeconfig",
        help="Kubeconfig (default: $KUBECONFIG or ~/.kube/config, else the service account).",
    ),
) -> None:
    """Release what a stopped gharc left for a gharc successor, so ARC takes over at once.

    Deletes the message sessions recorded on EphemeralRunnerSets and removes gharc's
    annotations and GitHub Secret finalizers, as `gharc controller
    --release-sessions-on-stop` does on its way out. Only while no gharc controller runs
    (docs/migration-from-arc.md#rollback).
    """
    import asyncio

    from gharc.controllers.scaleset.release import run_release

    raise typer.Exit(asyncio.run(run_release(kubeconfig, namespace)))


@app.command(
    "webhook-server",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def webhook_server(ctx: typer.Context) -> None:
    """Run the legacy workflow_job webhook server (ARC's flags; `--help` lists them)."""
    from gharc.webhook.main import main as webhook_main

    raise typer.Exit(webhook_main(list(ctx.args)))
