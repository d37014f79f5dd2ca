"""One declaration per setting: a dataclass field says its flag, env var, help and default.

Why: each flag of ``gharc controller`` used to be named in an argparse call, a dataclass
field, the argv-to-dataclass mapping and an options builder, with a default in two or
three of them, and those defaults drifted apart. Here a setting is a field made by
:func:`setting`; :func:`build_parser` derives the argparse parser from the fields,
:func:`read` turns the parsed flags and the environment into field values (a flag wins over
its env var; validation errors become :class:`UsageError` naming the flag),
:func:`options_fields` hands the values to an options dataclass by field name, and
:func:`flag_table` writes the Markdown table docs/configuration.md carries.

How a field's default decides its kind: ``bool`` is a switch (``store_true``), ``tuple``
with a flag is a repeatable flag (``append``), anything else takes one value, parsed by the
setting's ``parse`` (default: ``int``, ``float`` or ``str`` after the default's type).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Declared",
    "Parse",
    "Setting",
    "UsageError",
    "build_parser",
    "declared",
    "flag_table",
    "number",
    "options_fields",
    "read",
    "setting",
]

_KEY = "gharc.setting"

Parse = Callable[[str], Any]
"""Text of a flag or env var -> the field's value; a ``ValueError``'s message is reported
after the flag's name (``"must not be negative"``, ``"'x' is not a number"``)."""


class UsageError(ValueError):
    """The process cannot start with these flags or this environment (exit code 2)."""


@dataclass(frozen=True)
class Setting:
    """What a field declares besides its name, type and default."""

    flags: tuple[str, ...]
    """The flag's spelling first, then its aliases; empty for an env-only setting."""
    env: str | None
    """Env var read when the flag is not given (or given empty)."""
    help: str
    chart: str | None
    """The Helm chart value that renders this flag (``flags.logLevel``), if any."""
    parse: Parse | None
    choices: tuple[str, ...]
    split: bool
    """A repeatable flag whose values are also comma-separated lists."""
    group: str
    """Title of the ``--help`` section; callers also skip whole groups (legacy mode only)."""
    option: str | None
    """Name of the options dataclass field fed by this setting, when not the same name."""
    shown_default: str | None
    """The default as a user writes it, when not the field's default (``1m`` for 60.0)."""

    @property
    def name(self) -> str:
        """How messages name the setting: its flag, else its env var."""
        return self.flags[0] if self.flags else (self.env or "")


def setting(
    default: Any,
    *,
    help: str,
    flag: str | None = None,
    aliases: tuple[str, ...] = (),
    env: str | None = None,
    chart: str | None = None,
    parse: Parse | None = None,
    choices: tuple[str, ...] = (),
    split: bool = False,
    group: str = "",
    option: str | None = None,
    shown_default: str | None = None,
) -> Any:
    """A dataclass field declaring one setting (see :class:`Setting` for the arguments)."""
    spec = Setting(
        flags=((flag,) if flag else ()) + aliases,
        env=env,
        help=help,
        chart=chart,
        parse=parse,
        choices=choices,
        split=split,
        group=group,
        option=option,
        shown_default=shown_default,
    )
    return dataclasses.field(default=default, metadata={_KEY: spec})


@dataclass(frozen=True)
class Declared:
    """One setting field of a settings dataclass."""

    name: str
    default: Any
    spec: Setting

    @property
    def kind(self) -> str:
        if isinstance(self.default, bool):
            return "switch"
        if isinstance(self.default, tuple) and self.spec.flags:
            return "repeat"
        return "value"


def declared(cls: type) -> Iterator[Declared]:
    """The setting fields of ``cls`` in declaration order (plain fields are skipped)."""
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(_KEY)
        if spec is not None:
            yield Declared(f.name, f.default, spec)


def number(
    kind: type[int] | type[float] = float, *, minimum: float | None = None, positive: bool = False
) -> Parse:
    """A parser of whole numbers (``int``) or numbers (``float``) with a lower bound."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ValueError(f"{text!r} is not {what}") from None
        if positive and value <= 0:
            raise ValueError("must be positive")
        if minimum is not None and value < minimum:
            raise ValueError(
                "must not be negative" if minimum == 0 else f"must be at least {minimum}"
            )
        return value

    return parse


def _default_parse(default: Any) -> Parse:
    if isinstance(default, int):
        return number(int)
    if isinstance(default, float):
        return number(float)
    return str


def _shown(d: Declared) -> str:
    if d.spec.shown_default is not None:
        return d.spec.shown_default
    if d.default in ("", None, ()) or isinstance(d.default, bool):
        return ""
    if isinstance(d.default, float) and d.default.is_integer():
        return str(int(d.default))
    return str(d.default)


def _help(d: Declared) -> str:
    parts = [d.spec.help]
    if d.spec.env:
        parts.append(f"(env {d.spec.env})")
    shown = _shown(d)
    if shown:
        parts.append(f"(default: {shown})")
    return " ".join(parts).replace("%", "%%")


def build_parser(
    cls: type, *, prog: str, description: str, ignored: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """The argparse parser of ``cls``' flags; ``ignored`` flags are accepted, hidden and
    dropped (flags of ARC's charts that gharc has no use for).

    Values are parsed by :func:`read`, not by argparse, so a bad value is a
    :class:`UsageError` naming the flag, as the cross-setting checks are.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    groups: dict[str, Any] = {}
    for d in declared(cls):
        spec = d.spec
        if not spec.flags:
            continue
        target: Any = parser
        if spec.group:
            if spec.group not in groups:
                groups[spec.group] = parser.add_argument_group(spec.group)
            target = groups[spec.group]
        kw: dict[str, Any] = {"dest": d.name, "help": _help(d)}
        if d.kind == "switch":
            kw["action"] = "store_true"
        else:
            kw.update(default=None, metavar=spec.flags[0].lstrip("-").upper().replace("-", "_"))
            if d.kind == "repeat":
                kw["action"] = "append"
            elif spec.choices:
                kw["metavar"] = "{" + ",".join(spec.choices) + "}"
        target.add_argument(*spec.flags, **kw)
    for flag in ignored:
        parser.add_argument(flag, dest=f"ignored{flag}", default=None, help=argparse.SUPPRESS)
    return parser


def _convert(d: Declared, text: str, source: str) -> Any:
    spec = d.spec
    if spec.choices and text not in spec.choices:
        raise UsageError(f"{source} {text!r}: use one of {', '.join(spec.choices)}")
    parse = spec.parse or _default_parse(d.default)
    try:
        return parse(text)
    except ValueError as err:
        raise UsageError(f"{source} {err}") from None


def read(
    cls: type,
    ns: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    skip: Callable[[Setting], bool] | None = None,
) -> dict[str, Any]:
    """Field values of ``cls`` given by flags in ``ns`` or by the environment.

    A setting neither gives is left out (the field's default applies). A flag given empty
    falls back to its env var, as ARC's envconfig defaults do. Settings ``skip`` selects
    are not read at all: their defaults stand and bad values in them pass unnoticed.
    """
    values: dict[str, Any] = {}
    for d in declared(cls):
        spec = d.spec
        if skip is not None and skip(spec):
            continue
        raw = getattr(ns, d.name, None) if spec.flags else None
        if d.kind == "switch":
            if raw:
                values[d.name] = True
            continue
        if d.kind == "repeat":
            if raw:
                items = (
                    [part.strip() for item in raw for part in item.split(",")]
                    if spec.split
                    else raw
                )
                values[d.name] = tuple(i for i in items if i or not spec.split)
            continue
        text, source = raw, spec.name
        if (text is None or not text.strip()) and spec.env:
            from_env = environ.get(spec.env, "")
            if from_env.strip():
                text, source = from_env, spec.env
        if text is not None:
            values[d.name] = _convert(d, text, source)
    return values


def options_fields(settings: Any, options_cls: type) -> dict[str, Any]:
    """The values of ``settings`` that fields of ``options_cls`` take, keyed by those
    fields' names: a setting feeds the field of its own name or of its ``option``."""
    targets = {f.name for f in dataclasses.fields(options_cls)}
    out: dict[str, Any] = {}
    for d in declared(type(settings)):
        target = d.spec.option or d.name
        if target in targets:
            out[target] = getattr(settings, d.name)
    return out


def flag_table(cls: type) -> str:
    """The Markdown table of ``cls``' flags and env vars (docs/configuration.md holds it)."""
    lines = [
        "| flag | env | default | chart value | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for d in declared(cls):
        spec = d.spec
        flags = ", ".join(f"`{f}`" for f in spec.flags)
        env = f"`{spec.env}`" if spec.env else ""
        shown = _shown(d)
        default = f"`{shown}`" if shown else ("off" if d.kind == "switch" else "")
        chart = f"`{spec.chart}`" if spec.chart else ""
        text = f"{spec.group}: {spec.help}" if spec.group else spec.help
        if spec.choices:
            text += " One of " + ", ".join(f"`{c}`" for c in spec.choices) + "."
        lines.append(f"| {flags} | {env} | {default} | {chart} | {text} |")
    return "\n".join(lines) + "\n"
