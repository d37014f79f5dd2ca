"""``python -m gharc.listener`` (and ``gharc listener``): read the config, run, exit.

The listener pod's command. Exit codes: 0 stopped by a signal, 1 deterministic failure
(one line on stderr), 2 invalid config (one line on stderr, before any network call).
Logging is set up from the config's ``log_level``/``log_format`` by the controller's and
the webhook server's :func:`gharc.kube.logging.configure_logging`, so the three processes
write the same lines.
"""

from __future__ import annotations

import asyncio
import sys

# httpx's package imports its command-line client (click, rich, pygments: about 4 MiB of
# RSS) whenever those are installed, and typer installs them; a listener process never runs
# it. A ``None`` entry makes that import fail, and httpx then skips its CLI.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from gharc.kube.logging import configure_logging
from gharc.listener.config import ConfigError, load_config

__all__ = ["main"]


def main(config_path: str | None = None) -> int:
    """Load and validate the config, then run the listener to completion."""
    try:
        cfg = load_config(config_path)
    except ConfigError as err:
        print(f"gharc listener: invalid config: {err}", file=sys.stderr, flush=True)
        return 2
    configure_logging(cfg)
    if cfg.vault_type and not cfg.has_credentials:
        from gharc.listener.vault import resolve_vault

        try:
            cfg = asyncio.run(resolve_vault(cfg))
        except ConfigError as err:
            # Deterministic until someone fixes the vault: exit 1, one line, as for
            # credentials GitHub rejects.
            print(f"gharc listener: {err}", file=sys.stderr, flush=True)
            return 1
    from gharc.listener.app import run

    try:
        return asyncio.run(run(cfg))
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        return 130


if __name__ == "__main__":
    sys.exit(main())
