"""Every field of the scale set CRDs has a description, so `kubectl explain` is useful.

`kubectl explain autoscalingrunnerset.spec --recursive` prints what the CRD's
openAPIV3Schema says; a field without a description shows as a bare type. Fields of the
embedded pod templates point at the pod API's own documentation, and those pointers must
name real pod fields.
"""

from __future__ import annotations

import re

import pytest

from gharc.api import crds
from gharc.api.descriptions import ROOT_EXEMPT, MissingDescription, apply
from testworld.arcdata import schema_of, walk_properties

_POINTER = re.compile(r"^Pod field: see `kubectl explain pod\.([A-Za-z0-9.]+)`\.$")


def _scaleset() -> list[tuple[str, dict[str, object]]]:
    return [(d["spec"]["names"]["kind"], schema_of(d)) for d in crds.load("scaleset")]


@pytest.mark.parametrize("kind", [k for k, _ in _scaleset()])
def test_every_field_has_a_description(kind: str) -> None:
    schema = dict(_scaleset())[kind]
    props = list(walk_properties(schema))  # type: ignore[arg-type]
    missing = [
        path
        for path, sub in props
        if path not in ROOT_EXEMPT and not str(sub.get("description") or "").strip()
    ]
    assert len(props) > 100
    assert missing == []


def test_pod_pointers_name_real_pod_fields() -> None:
    _, pod = crds.load_pod_template_schema()
    schema = dict(_scaleset())["AutoscalingRunnerSet"]
    checked = 0
    for _, sub in walk_properties(schema):  # type: ignore[arg-type]
        m = _POINTER.match(str(sub.get("description") or ""))
        if not m:
            continue
        node = pod
        for part in m.group(1).split("."):
            while "properties" not in node and isinstance(node.get("items"), dict):
                node = node["items"]
            node = node["properties"][part]
        checked += 1
    assert checked > 2000  # both templates


def test_own_fields_are_in_our_words_not_pointers() -> None:
    spec = dict(_scaleset())["AutoscalingRunnerSet"]["properties"]["spec"]  # type: ignore[index]
    for name, sub in spec["properties"].items():
        assert not _POINTER.match(sub["description"]), name


def test_a_new_field_without_description_fails_generation() -> None:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"newField": {"type": "string"}}}},
    }
    with pytest.raises(MissingDescription, match=r"\.spec\.newField"):
        apply(schema, {"spec": "the spec"})
