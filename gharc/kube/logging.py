"""Structured logging: one JSON object per line in clusters, readable lines on a console.

Each reconcile runs with a context (controller, namespace, name, reconcile id) held in a
``contextvars.ContextVar``; the formatters add it to every record logged while it is set,
so code deep inside a reconciler logs with the object's identity without passing loggers
around (controller-runtime's ``log.FromContext``).

The controller, the webhook server and the listener all set up logging here
(:func:`configure_logging`), so ``log_format: json`` gives a log shipper one shape from every
gharc process. Standard library only: the pod-mode listener imports it and must stay lean.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import sys
import types
from collections.abc import Iterator, Mapping
from typing import IO, Any, Protocol

__all__ = [
    "LOG_LEVELS",
    "ConsoleFormatter",
    "JsonFormatter",
    "LoggingSettings",
    "configure_logging",
    "level_of",
    "log_context",
    "log_fields",
    "setup_logging",
]

#: The ``--log-level`` / ``log_level`` names ARC's controller, listener and webhook server
#: accept, and the level each means. One table, so the three commands and the listener
#: config the controller writes agree on what is valid.
LOG_LEVELS: Mapping[str, int] = types.MappingProxyType(
    {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
)


def level_of(name: str, default: int = logging.INFO) -> int:
    """The level of a ``log_level`` name (any case; ``warning`` too, as the listener's
    config allows), or ``default`` for a name that is not one."""
    key = name.lower()
    return LOG_LEVELS.get("warn" if key == "warning" else key, default)


_EMPTY: Mapping[str, Any] = types.MappingProxyType({})
_CONTEXT: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "gharc_log_context", default=_EMPTY
)

_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)


def log_fields() -> Mapping[str, Any]:
    """The fields of the current logging context."""
    return _CONTEXT.get()


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every record logged inside the block (nests; inner wins)."""
    token = _CONTEXT.set({**_CONTEXT.get(), **fields})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    fields = dict(_CONTEXT.get())
    for key, value in record.__dict__.items():
        if key not in _STANDARD and not key.startswith("_"):
            fields[key] = value
    return fields


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...context, ...extra}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ConsoleFormatter(logging.Formatter):
    """``time level logger msg key=value ...`` for humans."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = _extras(record)
        if extras:
            tail = " ".join(f"{k}={v}" for k, v in extras.items())
            head, sep, rest = line.partition("\n")
            line = f"{head} {tail}{sep}{rest}"
        return line


def setup_logging(
    *, level: str | int = "info", format: str = "text", stream: IO[str] | None = None
) -> None:
    """Configure the root logger once for the process.

    ``level`` is a ``log_level`` name (:data:`LOG_LEVELS`, any case, or ``warning``) or a
    ``logging`` level; ``format`` is ``json`` or ``text`` (``console`` is the same). gharc's
    own loggers log at ``level``; everything else (httpx, aiohttp's access log, asyncio) at
    ``WARNING`` or above: ARC's default level is ``debug``, and a third-party library's
    per-request lines at that level would bury gharc's.
    """
    if isinstance(level, str):
        number = level_of(level, -1)
        if number < 0:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    else:
        number = level
    handler = logging.StreamHandler(stream or sys.stderr)
    if format == "json":
        handler.setFormatter(JsonFormatter())
    elif format in ("text", "console"):
        handler.setFormatter(ConsoleFormatter())
    else:
        raise ValueError(f"unknown log format {format!r}; use 'json' or 'text'")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, number))
    logging.getLogger("gharc").setLevel(number)


class LoggingSettings(Protocol):
    """What :func:`configure_logging` reads: the controller's and the webhook server's
    ``--log-level``/``--log-format`` settings, and the listener's ``config.json``."""

    @property
    def log_level(self) -> str: ...

    @property
    def log_format(self) -> str: ...


def configure_logging(settings: LoggingSettings) -> None:
    """Set up the process' logging from its ``log_level`` and ``log_format``: one set-up
    for the three commands, so their levels and JSON lines agree."""
    setup_logging(level=settings.log_level, format=settings.log_format)
