"""``--runner-startup-timeout`` reaches the EphemeralRunnerSet reconciler's options."""

from __future__ import annotations

import pytest

from gharc.controllers.main import parse_args, scaleset_options
from gharc.settings.declare import UsageError

ENV = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems"}


def test_default_is_ten_minutes() -> None:
    args = parse_args(["--auto-scaling-runner-set-only"], environ=ENV)
    assert scaleset_options(args).runner_startup_timeout == 600.0


def test_flag_sets_the_option() -> None:
    args = parse_args(
        ["--auto-scaling-runner-set-only", "--runner-startup-timeout=90"], environ=ENV
    )
    assert scaleset_options(args).runner_startup_timeout == 90.0


def test_negative_is_refused() -> None:
    with pytest.raises(UsageError, match="runner-startup-timeout"):
        parse_args(["--auto-scaling-runner-set-only", "--runner-startup-timeout=-1"], environ=ENV)
