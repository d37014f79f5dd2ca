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


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
