"""gharc's CRDs accept every object ARC's CRDs accept, and store it the same way.

An object created under ARC's CRDs must stay writable after the switch: a schema rule ARC
lacked (a name limit, a required field, an enum) would refuse every later write of it,
finalizer removal included, and leave it undeletable. So: no restricting keyword ARC's
schema lacks, no property ARC's has that ours would prune, the same defaults, the same
list and map types (see :func:`compare_schemas` for the departures that accept more).
"""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api import crds
from testworld.arcdata import (
    ArcDataMissing,
    arc_crds,
    compare_schemas,
    schema_of,
)


def _arc() -> dict[str, dict[str, Any]]:
    try:
        return {doc["metadata"]["name"]: doc for doc in arc_crds()}
    except ArcDataMissing as err:
        pytest.skip(str(err))


def _ours() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in crds.load("all")}


def test_every_arc_crd_has_a_gharc_crd_with_the_same_names() -> None:
    arc, ours = _arc(), _ours()
    assert sorted(arc) == sorted(ours)
    for name, doc in arc.items():
        for key in ("kind", "plural", "singular", "listKind"):
            assert ours[name]["spec"]["names"][key] == doc["spec"]["names"][key]
        assert ours[name]["spec"]["scope"] == doc["spec"]["scope"]
        assert [v["name"] for v in ours[name]["spec"]["versions"]] == [
            v["name"] for v in doc["spec"]["versions"]
        ]


@pytest.mark.parametrize(
    "name",
    sorted(
        [
            "autoscalinglisteners.actions.github.com",
            "autoscalingrunnersets.actions.github.com",
            "ephemeralrunners.actions.github.com",
            "ephemeralrunnersets.actions.github.com",
            "horizontalrunnerautoscalers.actions.summerwind.dev",
            "runnerdeployments.actions.summerwind.dev",
            "runnerreplicasets.actions.summerwind.dev",
            "runners.actions.summerwind.dev",
            "runnersets.actions.summerwind.dev",
        ]
    ),
)
def test_schema_accepts_what_arcs_accepts(name: str) -> None:
    arc, ours = _arc(), _ours()
    diff = compare_schemas(schema_of(arc[name]), schema_of(ours[name]))
    assert diff.problems() == [], "\n".join(diff.problems())


def test_comparison_catches_what_would_strand_an_object() -> None:
    arc = {"type": "object", "properties": {"spec": {"type": "object", "properties": {}}}}
    strict = {
        "type": "object",
        "required": ["spec"],
        "x-kubernetes-validations": [{"rule": "size(self.metadata.name) <= 45"}],
        "properties": {"spec": {"type": "object", "properties": {}, "maxProperties": 3}},
    }
    diff = compare_schemas(arc, strict)
    assert len(diff.stricter) == 3, diff.stricter
    keyed = {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "map"}
    assert compare_schemas({"type": "array", "items": {"type": "string"}}, keyed).different
