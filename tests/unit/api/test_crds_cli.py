"""``gharc crds`` prints an applyable YAML stream."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from gharc.commands import app


def test_crds_command_prints_scaleset_crds() -> None:
    result = CliRunner().invoke(app, ["crds", "--group", "scaleset"])
    assert result.exit_code == 0, result.output
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = [d for d in yaml.load_all(result.stdout, Loader=loader) if d]
    assert sorted(d["metadata"]["name"] for d in docs) == [
        "autoscalinglisteners.actions.github.com",
        "autoscalingrunnersets.actions.github.com",
        "ephemeralrunners.actions.github.com",
        "ephemeralrunnersets.actions.github.com",
    ]


def test_crds_command_rejects_unknown_group() -> None:
    result = CliRunner().invoke(app, ["crds", "--group", "nope"])
    assert result.exit_code != 0
