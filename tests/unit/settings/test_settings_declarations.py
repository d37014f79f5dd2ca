"""Each process' settings are declared once, and everything derived from them agrees.

The parser, the dataclass defaults, the options dataclasses the reconcilers take and the
flag tables of docs/configuration.md all come from the settings declarations; these tests
fail when a flag or env var is declared twice, when the parser and the dataclass disagree
on a flag or a default, when an options dataclass keeps a default of its own that differs
from the setting feeding it, and when a table or a chart value row is stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from gharc.controllers import main as controller_main
from gharc.controllers.settings import IGNORED_ARC_FLAGS, ControllerSettings
from gharc.settings.declare import declared, options_fields
from gharc.webhook import main as webhook_main
from gharc.webhook.settings import WebhookSettings
from testworld import flagdocs as doc


@dataclasses.dataclass(frozen=True)
class Process:
    cls: type
    parser: argparse.ArgumentParser
    parse: Callable[[list[str], dict[str, str]], Any]
    argv: list[str]
    """The flags every start needs (the controller's mode, the webhook's metrics address
    for --metrics-only)."""
    env: dict[str, str]
    derived: dict[str, Any]
    """Fields whose value without other flags is not the declared default, and why."""
    ignored: tuple[str, ...] = ()


PROCESSES = {
    "gharc controller": Process(
        ControllerSettings,
        controller_main.build_parser(),
        controller_main.parse_args,
        ["--auto-scaling-runner-set-only"],
        {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc"},
        {
            "auto_scaling_runner_set_only": True,  # given
            "controller_namespace": "arc",  # from the env
            "leader_election_namespace": "arc",  # defaults to the controller's namespace
        },
        IGNORED_ARC_FLAGS,
    ),
    "gharc webhook-server": Process(
        WebhookSettings,
        webhook_main.build_parser(),
        webhook_main.parse_args,
        ["--metrics-addr=:9"],
        {"GITHUB_WEBHOOK_SECRET_TOKEN": "s"},
        {"secret": "s", "metrics_addr": ":9"},
    ),
}
NAMES = sorted(PROCESSES)


def _option_strings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}


@pytest.mark.parametrize("name", NAMES)
def test_no_flag_or_env_var_is_declared_twice(name: str) -> None:
    cls, ignored = PROCESSES[name].cls, PROCESSES[name].ignored
    flags = Counter(f for d in declared(cls) for f in d.spec.flags)
    flags.update(ignored)
    envs = Counter(d.spec.env for d in declared(cls) if d.spec.env)
    assert [f for f, n in flags.items() if n > 1] == []
    assert [e for e, n in envs.items() if n > 1] == []
    assert all(re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*", f) for f in flags), flags


@pytest.mark.parametrize("name", NAMES)
def test_the_parser_has_exactly_the_declared_flags_each_feeding_its_field(name: str) -> None:
    p = PROCESSES[name]
    cls, parser, ignored = p.cls, p.parser, p.ignored
    actions = _option_strings(parser)
    declared_flags = {f: d.name for d in declared(cls) for f in d.spec.flags}
    assert set(actions) == set(declared_flags) | set(ignored)
    fields = {f.name for f in dataclasses.fields(cls)}
    for flag, field_name in declared_flags.items():
        assert actions[flag].dest == field_name and field_name in fields, flag
    for flag in ignored:
        assert actions[flag].help == argparse.SUPPRESS


@pytest.mark.parametrize("name", NAMES)
def test_declared_defaults_are_valid_values_of_their_type(name: str) -> None:
    """A default is a value of the field's kind (no mutable defaults, no text where the
    parser yields numbers), so "not given" and "given the default" mean the same."""
    cls = PROCESSES[name].cls
    for d in declared(cls):
        if d.default is None:
            continue
        assert isinstance(d.default, str | int | float | bool | tuple), d.name
        if isinstance(d.default, tuple):
            assert all(isinstance(x, str) for x in d.default), d.name


@pytest.mark.parametrize("name", NAMES)
def test_parsed_without_flags_gives_the_declared_defaults(name: str) -> None:
    """The parser adds no default of its own: with no flag given every field of the parsed
    settings is the dataclass' default (or derived, as listed)."""
    p = PROCESSES[name]
    parsed = p.parse(p.argv, p.env)
    for d in declared(p.cls):
        assert getattr(parsed, d.name) == p.derived.get(d.name, d.default), d.name
        assert getattr(p.cls(), d.name) == d.default, d.name


def test_controller_legacy_mode_without_flags_gives_the_declared_defaults() -> None:
    parsed = controller_main.parse_args([], {"GITHUB_TOKEN": "ghp_x"})
    for d in declared(ControllerSettings):
        want = "ghp_x" if d.name == "github_token" else d.default
        assert getattr(parsed, d.name) == want, d.name


@pytest.mark.parametrize("name", NAMES)
def test_every_flag_round_trips_through_the_parser(name: str) -> None:
    """Each flag, given a value unlike its default, lands in its own field."""
    p = PROCESSES[name]
    for d in declared(p.cls):
        if not d.spec.flags or d.spec.group:
            continue
        for flag in d.spec.flags:
            if d.kind == "switch":
                argv, want = [flag], True
            elif d.spec.choices:
                other = next(c for c in d.spec.choices if c != d.default)
                argv, want = [f"{flag}={other}"], other
            elif d.kind == "repeat":
                argv, want = [f"{flag}=x"], ("x",)
            elif isinstance(d.default, int | float) or d.spec.parse is not None:
                argv, want = [f"{flag}=7"], 7
            else:
                argv, want = [f"{flag}=x"], "x"
            parsed = p.parse([*p.argv, *argv], p.env)
            assert getattr(parsed, d.name) == want, flag


def _feeds(options_cls: type) -> dict[str, Any]:
    return {f.name: f for f in dataclasses.fields(options_cls)}


@pytest.mark.parametrize(
    ("module", "cls_name", "derived"),
    [
        ("gharc.controllers.scaleset.options", "ScaleSetOptions", {"controller_namespace"}),
        # LegacyOptions.github_url is the server URL and runner_github_url None-or-URL,
        # both computed in legacy_options from the settings of the same names.
        ("gharc.controllers.legacy.options", "LegacyOptions", {"github_url", "runner_github_url"}),
    ],
)
def test_options_defaults_agree_with_the_settings_feeding_them(
    module: str, cls_name: str, derived: set[str]
) -> None:
    """An options dataclass constructed directly (as tests do) behaves as the process
    started without flags: where a setting feeds a field, their defaults are the same (the
    options fields read the declaration's default; this fails if one gets a literal of its
    own that differs)."""
    import importlib

    options_cls = getattr(importlib.import_module(module), cls_name)
    fed = options_fields(ControllerSettings(), options_cls)
    assert fed, cls_name
    targets = _feeds(options_cls)
    for name, value in fed.items():
        if name in derived:
            continue
        f = targets[name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert default == value, f"{cls_name}.{name}: {default!r} != setting default {value!r}"


def test_scaleset_options_take_every_option_field_a_setting_names() -> None:
    from gharc.controllers.scaleset.options import ScaleSetOptions

    targets = _feeds(ScaleSetOptions)
    for d in declared(ControllerSettings):
        if d.spec.option:
            assert d.spec.option in targets, d.name


def test_the_flag_tables_in_the_docs_are_generated_from_the_declarations() -> None:
    text = doc.DOC.read_text(encoding="utf-8")
    assert doc.render(text) == text, "run: python -m testworld.flagdocs"
    for name in doc.processes():
        assert f"<!-- flags: {name} -->" in text, name


def test_each_chart_value_row_names_the_flag_it_renders() -> None:
    """docs/configuration.md's chart value tables say which flag each value renders; the
    declarations name the chart value of a flag: both must say the same."""
    text = doc.DOC.read_text(encoding="utf-8")
    values_part = text[: text.index("## Command-line flags")]
    for d in declared(ControllerSettings):
        if not d.spec.chart:
            continue
        rows = [ln for ln in values_part.splitlines() if ln.startswith(f"| `{d.spec.chart}` |")]
        assert len(rows) == 1, d.spec.chart
        assert any(f"`{flag}" in rows[0] for flag in d.spec.flags), (d.spec.chart, rows[0])


def test_the_listener_process_loads_none_of_it() -> None:
    """The listener is configured by its JSON file and kept light: the settings machinery
    (argparse) is for the controller and the webhook server only."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import gharc.cli, gharc.listener.__main__, gharc.listener.app\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('gharc.settings') "
        "or m in ('argparse', 'aiohttp'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_the_legacy_docs_name_only_declared_flags_with_their_env_and_default() -> None:
    """docs/legacy.md describes legacy mode's and the webhook server's flags in prose
    tables; each flag it lists must exist, and where a row gives an env var or a quoted
    default, the declaration's."""
    legacy_doc = (doc.DOC.parent / "legacy.md").read_text(encoding="utf-8")
    specs = {
        flag: d
        for cls in (ControllerSettings, WebhookSettings)
        for d in declared(cls)
        for flag in d.spec.flags
    }
    rows = [ln.split("|")[1:-1] for ln in legacy_doc.splitlines() if ln.startswith("| `--")]
    assert rows
    for cells in rows:
        flag = cells[0].strip().strip("`")
        assert flag in specs, f"docs/legacy.md lists {flag}, which no process declares"
        if len(cells) != 4:  # only the legacy controller table has env and default columns
            continue
        d = specs[flag]
        env, default = cells[1].strip(), cells[2].strip()
        assert env == (f"`{d.spec.env}`" if d.spec.env else ""), flag
        if default.startswith("`"):
            assert default == f"`{d.spec.shown_default or d.default}`", flag
