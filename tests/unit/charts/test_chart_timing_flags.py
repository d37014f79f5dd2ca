"""The controller's timing flags are chart values: each renders to its flag, with the
controller's own default, and the rendered command line parses to the value given. Which
flag a value renders, and which setting it fills, is read from the settings declarations."""

from __future__ import annotations

from typing import Any

import pytest
from cases import CASES

from gharc.api.scaleset import constants as c
from gharc.controllers.main import ControllerArgs, parse_args
from gharc.controllers.settings import ControllerSettings
from gharc.settings.declare import Declared, declared
from testworld.helm import Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

#: chart values under ``flags`` that are timings (seconds; 0 turns most of them off)
TIMING_VALUES = (
    "runnerRegistrationSyncInterval",
    "runnerRegistrationGrace",
    "runnerHangTimeout",
    "runnerStartupTimeout",
    "nodeLossTimeout",
)
_BY_CHART: dict[str, Declared] = {
    d.spec.chart: d for d in declared(ControllerSettings) if d.spec.chart
}
#: chart value under ``flags`` -> ControllerSettings field
TIMING = {value: _BY_CHART[f"flags.{value}"].name for value in TIMING_VALUES}


def _args(helm: Helm, **flags: Any) -> ControllerArgs:
    chart, namespace, values = CASES["controller-default"]
    merged = {**values, "flags": {**values.get("flags", {}), **flags}}
    result = helm.template(chart, namespace=namespace, values=merged)
    assert result.ok, result.stderr
    deploy = next(d for d in result.documents() if d["kind"] == "Deployment")
    containers = deploy["spec"]["template"]["spec"]["containers"]
    args = next(x for x in containers if x["name"] == "manager")["args"]
    for value in TIMING:
        flag = _BY_CHART[f"flags.{value}"].spec.flags[0]
        assert any(a.startswith(flag + "=") for a in args), f"{flag} not rendered"
    return parse_args(args, {c.ENV_CONTROLLER_NAMESPACE: namespace})


def test_timing_flag_defaults_match_the_controller(helm: Helm) -> None:
    rendered = _args(helm)
    defaults = ControllerArgs(controller_namespace="x")
    for field in TIMING.values():
        assert getattr(rendered, field) == getattr(defaults, field), field


def test_timing_flags_render_the_values_given(helm: Helm) -> None:
    given = dict(zip(TIMING, (30, 45.5, 120, 900, 0), strict=True))
    rendered = _args(helm, **given)
    for value, field in TIMING.items():
        assert getattr(rendered, field) == given[value], field


def test_timing_flags_refuse_negative_values(helm: Helm) -> None:
    chart, namespace, _ = CASES["controller-default"]
    for value in TIMING:
        result = helm.template(chart, namespace=namespace, values={"flags": {value: -1}})
        assert not result.ok, value


def _rules(helm: Helm, kind: str, name: str, **values: Any) -> list[dict[str, Any]]:
    chart, namespace, base = CASES["controller-default"]
    result = helm.template(chart, namespace=namespace, values={**base, **values})
    assert result.ok, result.stderr
    found = [d for d in result.documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return [r for d in found for r in d.get("rules") or ()]


def _node_verbs(rules: list[dict[str, Any]]) -> set[str]:
    """What the rules allow on Nodes (they share a rule with pods: ARC's rule layout)."""
    return {
        v for r in rules if r["apiGroups"] == [""] and "nodes" in r["resources"] for v in r["verbs"]
    }


def test_nodes_are_readable_for_node_loss_only(helm: Helm) -> None:
    """Node loss watches Nodes: list/watch in the ClusterRole, not at all when it is off;
    with a single watched namespace (no cluster-wide rights) it is off."""
    on = _node_verbs(_rules(helm, "ClusterRole", "arc-gha-rs-controller"))
    assert on == {"list", "watch"}
    off = {"flags": {"nodeLossTimeout": 0}}
    assert not _node_verbs(_rules(helm, "ClusterRole", "arc-gha-rs-controller", **off))
    chart, namespace, values = CASES["controller-watch-single-namespace"]
    result = helm.template(chart, namespace=namespace, values=values)
    deploy = next(d for d in result.documents() if d["kind"] == "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--node-loss-timeout=0" in args
