"""The single ``gharc`` entry point.

The subcommands are typer commands in :mod:`gharc.commands`, imported only when needed:
``gharc listener`` (the listener pod's command) runs without typer, which costs a pod-mode
listener process about 3 MiB of RSS and, while it parses the arguments, imports pydantic
(about 9 MiB more) for its coercions. ``gharc listener --help`` and anything unusual still
go through typer, so help and errors are typer's.
"""

from __future__ import annotations

import os
import sys

# httpx's package imports its own command-line client (click, rich, pygments: about 4 MiB
# of RSS) whenever those are installed; no gharc process runs it. A ``None`` entry makes
# that import fail, and httpx then skips its CLI (gharc.listener.__main__ does the same).
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

__all__ = ["main", "plain_listener_command", "process_defaults"]


def process_defaults() -> None:
    """Settings every gharc process shares, made before any subcommand imports its code.

    ``_created`` series: Go's Prometheus client (ARC, controller-runtime) has none, so
    ARC's dashboards do not expect them, and they double the series of every counter.
    prometheus_client reads this variable once, when it is first imported.
    """
    os.environ.setdefault("PROMETHEUS_DISABLE_CREATED_SERIES", "true")


def plain_listener_command(args: list[str]) -> tuple[str | None] | None:
    """``(config,)`` for a plain ``listener [--config PATH]`` command line (``config`` None
    when absent); None for anything else (help, an unknown option, a missing value)."""
    if args[:1] != ["listener"]:
        return None
    rest = args[1:]
    if not rest:
        return (None,)
    if len(rest) == 1 and rest[0].startswith("--config=") and len(rest[0]) > len("--config="):
        return (rest[0].partition("=")[2],)
    if len(rest) == 2 and rest[0] == "--config" and not rest[1].startswith("-"):
        return (rest[1],)
    return None


def main() -> None:
    """Console-script entry point."""
    process_defaults()
    plain = plain_listener_command(sys.argv[1:])
    if plain is not None:
        from gharc.listener.__main__ import main as listener_main

        sys.exit(listener_main(plain[0]))
    from gharc.commands import app

    app()


if __name__ == "__main__":
    main()
