"""The CRD manifests on disk: generated, structurally sane, ARC-shaped."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api import crds
from gharc.api.generate import render_crd_files, stale_files
from gharc.api.scaleset import constants as c

KINDS = {
    "AutoscalingRunnerSet",
    "EphemeralRunnerSet",
    "EphemeralRunner",
    "AutoscalingListener",
}


def _schema(doc: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return result


def _by_kind() -> dict[str, dict[str, Any]]:
    return {d["spec"]["names"]["kind"]: d for d in crds.load("scaleset")}


def _at(schema: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in dotted.strip(".").split("."):
        if node is None:
            return None
        node = (node.get("properties") or {}).get(part)
    return node


def test_yaml_on_disk_equals_generator_output() -> None:
    _, pod = crds.load_pod_template_schema()
    files = render_crd_files(pod)
    assert stale_files(files) == [], "run: python -m gharc.api.generate"
    assert set(files) == set(crds.manifest_files("actions.github.com"))


def test_load_groups() -> None:
    scaleset = crds.load("scaleset")
    assert {d["spec"]["names"]["kind"] for d in scaleset} == KINDS
    assert {d["spec"]["group"] for d in scaleset} == {"actions.github.com"}
    assert len(crds.load("all")) == len(scaleset) + len(crds.load("legacy"))
    assert crds.load() == scaleset
    with pytest.raises(ValueError, match="unknown CRD group"):
        crds.load("nope")


def test_load_returns_independent_copies() -> None:
    first = crds.load("scaleset")
    first[0]["spec"]["group"] = "mutated"
    assert crds.load("scaleset")[0]["spec"]["group"] == "actions.github.com"


def test_dump_is_a_multi_document_stream() -> None:
    import yaml

    text = crds.dump(crds.load("scaleset"))
    docs = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert len(docs) == 4
    assert "&id" not in text and "*id" not in text


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_basics(kind: str) -> None:
    doc = _by_kind()[kind]
    spec = doc["spec"]
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["metadata"]["name"] == f"{spec['names']['plural']}.{c.GROUP}"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["listKind"] == f"{kind}List"
    assert spec["names"]["singular"] == kind.lower()
    # ARC has no short names or categories; neither do we.
    assert "shortNames" not in spec["names"] and "categories" not in spec["names"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_printer_columns_point_at_schema_fields(kind: str) -> None:
    doc = _by_kind()[kind]
    schema = _schema(doc)
    columns = doc["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns
    for col in columns:
        path = col["jsonPath"]
        if path == ".metadata.creationTimestamp":
            continue
        node = _at(schema, path)
        assert node is not None, f"{kind} column {col['name']!r}: {path} not in schema"
        expected = {"integer": {"integer"}, "number": {"integer", "number"}, "string": {"string"}}
        assert node["type"] in expected[col["type"]], (kind, path)


def _walk(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        yield path, node
        for k, v in (node.get("properties") or {}).items():
            yield from _walk(v, f"{path}.{k}")
        if isinstance(node.get("items"), dict):
            yield from _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from _walk(node["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    for path, node in _walk(_schema(_by_kind()[kind])):
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert node.get("type") in {
                "object",
                "array",
                "string",
                "integer",
                "number",
                "boolean",
            }, path
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), path
        if node.get("x-kubernetes-list-type") == "map":
            items = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in items.get("required", []) or "default" in items["properties"][key], (
                    path,
                    key,
                )


def test_ars_fields_and_validation() -> None:
    schema = _schema(_by_kind()["AutoscalingRunnerSet"])
    spec = schema["properties"]["spec"]
    # Nothing stricter than ARC's CRD: the ARS reconciler reports these as status Failed.
    assert "required" not in spec
    assert "x-kubernetes-validations" not in spec
    assert "x-kubernetes-validations" not in schema
    assert "required" not in schema
    for field in [
        "githubConfigUrl",
        "githubConfigSecret",
        "runnerGroup",
        "runnerScaleSetName",
        "runnerScaleSetLabels",
        "proxy",
        "githubServerTLS",
        "vaultConfig",
        "template",
        "listenerTemplate",
        "listenerMetrics",
        "autoscalingListener",
        "listenerServiceAccountMetadata",
        "listenerRoleMetadata",
        "listenerRoleBindingMetadata",
        "listenerConfigSecretMetadata",
        "ephemeralRunnerSetMetadata",
        "ephemeralRunnerMetadata",
        "ephemeralRunnerConfigSecretMetadata",
        "minRunners",
        "maxRunners",
    ]:
        assert field in spec["properties"], field
    assert spec["properties"]["minRunners"]["minimum"] == 0
    assert spec["properties"]["maxRunners"]["minimum"] == 0
    status = schema["properties"]["status"]["properties"]
    assert {k: v for k, v in status["observedGeneration"].items() if k != "description"} == {
        "type": "integer",
        "format": "int64",
    }
    containers = spec["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
    assert containers["items"]["required"] == ["name"]


def test_ers_and_er_fields() -> None:
    ers = _schema(_by_kind()["EphemeralRunnerSet"])
    assert ers["properties"]["spec"]["required"] == ["patchID"]
    assert "actionableRevision" in ers["properties"]["spec"]["properties"]
    ers_status = ers["properties"]["status"]
    assert "required" not in ers_status
    for field in [
        "currentReplicas",
        "pendingEphemeralRunners",
        "runningEphemeralRunners",
        "failedEphemeralRunners",
        "finishedEphemeralRunners",
        "deletingEphemeralRunners",
        "phase",
        "appliedActionableRevision",
        "finishedRunnerCleanupPatchID",
    ]:
        assert field in ers_status["properties"], field
    er = _schema(_by_kind()["EphemeralRunner"])
    assert er["properties"]["spec"]["required"] == [
        "githubConfigSecret",
        "githubConfigUrl",
        "runnerScaleSetId",
    ]
    # The pod template is inline: spec.metadata and spec.spec.
    assert "containers" in er["properties"]["spec"]["properties"]["spec"]["properties"]
    assert "labels" in er["properties"]["spec"]["properties"]["metadata"]["properties"]
    status = er["properties"]["status"]["properties"]
    for field in [
        "ready",
        "phase",
        "reason",
        "message",
        "runnerId",
        "runnerName",
        "failures",
        "jobRequestId",
        "jobId",
        "jobRepositoryName",
        "jobWorkflowRef",
        "workflowRunId",
        "jobDisplayName",
    ]:
        assert field in status, field
    assert status["failures"]["additionalProperties"]["format"] == "date-time"


def test_listener_status_has_failure_accounting() -> None:
    status = _schema(_by_kind()["AutoscalingListener"])["properties"]["status"]["properties"]
    assert status["failures"]["type"] == "integer"
    assert status["lastFailureTime"]["format"] == "date-time"
    assert status["lastFailedPodUID"]["type"] == "string"
