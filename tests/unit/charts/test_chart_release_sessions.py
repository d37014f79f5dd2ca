"""The controller chart's ``flags.releaseSessionsOnStop``: keep sessions unless told.

Off, a stopping controller leaves its sessions to the next gharc (a rolling upgrade resumes
them); on, it deletes them, which takes a call per scale set, so the pod gets 45 s to stop.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_chart_render import manager, render

from gharc.api.scaleset import constants as c
from gharc.controllers.main import parse_args
from testworld.helm import Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

FLAG = "--release-sessions-on-stop"


def _pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d.get("kind") == "Deployment"]
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def test_sessions_are_kept_by_default(helm: Helm) -> None:
    docs = render(helm, "controller-default")
    args = manager(docs)["args"]
    assert FLAG not in args
    assert parse_args(args, {c.ENV_CONTROLLER_NAMESPACE: "arc"}).release_sessions_on_stop is False
    assert _pod_spec(docs)["terminationGracePeriodSeconds"] == 10


def test_value_passes_the_flag_and_a_longer_grace_period(helm: Helm) -> None:
    docs = render(helm, "controller-default", flags={"releaseSessionsOnStop": True})
    args = manager(docs)["args"]
    assert FLAG in args
    assert parse_args(args, {c.ENV_CONTROLLER_NAMESPACE: "arc"}).release_sessions_on_stop is True
    assert _pod_spec(docs)["terminationGracePeriodSeconds"] == 45
