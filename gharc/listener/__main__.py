"""``python -m gharc.listener`` (and ``gharc listener``): read the config, run, exit.

The listener pod's command. Exit codes: 0 stopped by a signal, 1 deterministic failure
(one line on stderr), 2 invalid config (one line on stderr, before any network call).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

# httpx's package imports its command-line client (click, rich, pygments: about 4 MiB of
# RSS) whenever those are installed, and typer installs them; a listener process never runs
# it. A ``None`` entry makes that import fail, and httpx then skips its CLI.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from gharc.kube.logging import level_of
from gharc.listener.config import ConfigError, ListenerConfig, load_config

__all__ = ["configure_logging", "main"]


class _JsonFormatter(logging.Formatter):
    """One JSON object per line, the shape ARC's ``log_format: json`` gives log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(cfg: ListenerConfig) -> None:
    """Log to stderr at ``log_level`` in ``log_format``; third-party noise kept at WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    if cfg.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("gharc").setLevel(level_of(cfg.log_level, logging.DEBUG))


def main(config_path: str | None = None) -> int:
    """Load and validate the config, then run the listener to completion."""
    try:
        cfg = load_config(config_path)
    except ConfigError as err:
        print(f"gharc listener: invalid config: {err}", file=sys.stderr, flush=True)
        return 2
    configure_logging(cfg)
    from gharc.listener.app import run

    try:
        return asyncio.run(run(cfg))
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        return 130


if __name__ == "__main__":
    sys.exit(main())
