"""docs/configuration.md and the charts describe the same values, in both directions.

A value nobody documented is a value nobody can use; a documented value the chart lacks
is a setting that silently does nothing. The AutoscalingRunnerSet table is checked
against the CRD schema the same way.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from gharc.api import crds
from testworld.helm import CHARTS, ROOT

DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")

#: Values documented as a whole (Kubernetes objects passed through as they are: a pod
#: template, security contexts): their inner keys are Kubernetes', not the chart's.
OPAQUE = {"template", "podSecurityContext", "securityContext"}


def documented(marker: str) -> list[str]:
    """First-column backticked names of the table that follows ``<!-- marker -->``."""
    start = DOC.index(f"<!-- {marker} -->")
    names: list[str] = []
    for line in DOC[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if names:
                break
            continue
        cell = line.split("|")[1].strip()
        match = re.fullmatch(r"`([^`]+)`", cell)
        if match:
            names.append(match.group(1))
    return names


def leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in OPAQUE:
            out += leaves(value, f"{path}.")
        else:
            out.append(path)
    return out


def resolves(values: dict[str, Any], path: str) -> bool:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("chart", ["gharc-controller", "gharc-scale-set"])
def test_every_value_documented_and_every_documented_value_exists(chart: str) -> None:
    values = yaml.safe_load((CHARTS / chart / "values.yaml").read_text(encoding="utf-8"))
    docs = documented(f"values: {chart}")
    assert len(docs) == len(set(docs)), "a value is documented twice"
    missing = [v for v in docs if not resolves(values, v)]
    assert not missing, f"documented in docs/configuration.md but not in {chart}: {missing}"
    undocumented = [
        leaf
        for leaf in leaves(values)
        if leaf not in docs and not any(leaf.startswith(f"{o}.") for o in OPAQUE)
    ]
    assert not undocumented, f"{chart} values missing from docs/configuration.md: {undocumented}"


def test_autoscalingrunnerset_fields_match_the_crd() -> None:
    ars = next(
        d for d in crds.load("scaleset") if d["spec"]["names"]["kind"] == "AutoscalingRunnerSet"
    )
    schema = ars["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = set(schema["properties"]["spec"]["properties"])
    docs = documented("crd: AutoscalingRunnerSet.spec")
    assert set(docs) == fields, (
        f"not in the CRD: {sorted(set(docs) - fields)}; undocumented: {sorted(fields - set(docs))}"
    )


def test_the_doc_parser_sees_every_table() -> None:
    """Guards the guard: an empty table would make the tests above pass vacuously."""
    assert len(documented("values: gharc-controller")) > 30
    assert len(documented("values: gharc-scale-set")) > 30
    assert len(documented("crd: AutoscalingRunnerSet.spec")) > 15
