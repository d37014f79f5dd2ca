"""The controller chart's ``flags.allowUnrestrictedListenerTemplate``: off unless asked for."""

from __future__ import annotations

import pytest
from test_chart_render import manager, render

from gharc.api.scaleset import constants as c
from gharc.controllers.main import parse_args
from testworld.helm import Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

FLAG = "--allow-unrestricted-listener-template"


def test_restricted_by_default(helm: Helm) -> None:
    args = manager(render(helm, "controller-default"))["args"]
    assert FLAG not in args
    parsed = parse_args(args, {c.ENV_CONTROLLER_NAMESPACE: "arc-systems"})
    assert parsed.allow_unrestricted_listener_template is False


def test_value_passes_the_flag(helm: Helm) -> None:
    flags = {"allowUnrestrictedListenerTemplate": True}
    args = manager(render(helm, "controller-default", flags=flags))["args"]
    assert FLAG in args
    parsed = parse_args(args, {c.ENV_CONTROLLER_NAMESPACE: "arc-systems"})
    assert parsed.allow_unrestricted_listener_template is True
