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
from typing import Any

import pytest

from gharc.controllers import main as controller_main
from gharc.controllers.settings import IGNORED_ARC_FLAGS, ControllerSettings
from gharc.settings import doc
from gharc.settings.declare import declared, options_fields

#: command -> (its settings dataclass, its parser, flags the parser accepts and ignores)
PROCESSES: dict[str, tuple[type, argparse.ArgumentParser, tuple[str, ...]]] = {
    "gharc controller": (ControllerSettings, controller_main.build_parser(), IGNORED_ARC_FLAGS),
}
NAMES = sorted(PROCESSES)


def _option_strings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}


@pytest.mark.parametrize("name", NAMES)
def test_no_flag_or_env_var_is_declared_twice(name: str) -> None:
    cls, _, ignored = PROCESSES[name]
    flags = Counter(f for d in declared(cls) for f in d.spec.flags)
    flags.update(ignored)
    envs = Counter(d.spec.env for d in declared(cls) if d.spec.env)
    assert [f for f, n in flags.items() if n > 1] == []
    assert [e for e, n in envs.items() if n > 1] == []
    assert all(re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*", f) for f in flags), flags


@pytest.mark.parametrize("name", NAMES)
def test_the_parser_has_exactly_the_declared_flags_each_feeding_its_field(name: str) -> None:
    cls, parser, ignored = PROCESSES[name]
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
    cls, _, _ = PROCESSES[name]
    for d in declared(cls):
        if d.default is None:
            continue
        assert isinstance(d.default, str | int | float | bool | tuple), d.name
        if isinstance(d.default, tuple):
            assert all(isinstance(x, str) for x in d.default), d.name


def test_controller_parsed_without_flags_gives_the_declared_defaults() -> None:
    """The parser adds nothing of its own: with no flag given every field of the parsed
    settings is the dataclass' default, in both modes."""
    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc", "GITHUB_TOKEN": "ghp_x"}
    scaleset = controller_main.parse_args(["--auto-scaling-runner-set-only"], env)
    legacy = controller_main.parse_args([], env)
    defaults = ControllerSettings()
    derived = {
        "controller_namespace": "arc",
        "leader_election_namespace": "arc",  # defaults to the controller's namespace
    }
    for d in declared(ControllerSettings):
        want = derived.get(d.name, d.default)
        assert getattr(scaleset, d.name) == (
            True if d.name == "auto_scaling_runner_set_only" else want
        )
        if d.name != "github_token":
            assert getattr(legacy, d.name) == want, d.name
        assert getattr(defaults, d.name) == d.default


def test_every_flag_round_trips_through_the_parser() -> None:
    """Each flag, given a value unlike its default, lands in its own field."""
    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc"}
    for d in declared(ControllerSettings):
        if not d.spec.flags or d.spec.group:
            continue
        flag = d.spec.flags[0]
        if d.kind == "switch":
            argv, want = [flag], True
        elif d.spec.choices:
            other = next(c for c in d.spec.choices if c != d.default)
            argv, want = [f"{flag}={other}"], other
        elif d.kind == "repeat":
            argv, want = [f"{flag}=x"], ("x",)
        elif isinstance(d.default, int | float):
            argv, want = [f"{flag}=7"], 7
        else:
            argv, want = [f"{flag}=x"], "x"
        parsed = controller_main.parse_args(["--auto-scaling-runner-set-only", *argv], env)
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
    started without flags: where a setting feeds a field, their defaults are the same."""
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
    assert doc.render(text) == text, "run: python -m gharc.settings.doc"
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
