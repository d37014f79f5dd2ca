"""OpenAPI v3 -> structural CRD schema conversion, on small synthetic documents."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api import crds
from gharc.api.podtemplate import (
    POD_TEMPLATE_SPEC,
    QUANTITY_PATTERN,
    SchemaConversionError,
    pod_template_spec_schema,
)

P = "#/components/schemas/"


def _doc(**schemas: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        POD_TEMPLATE_SPEC: {
            "type": "object",
            "description": "template",
            "properties": {
                "metadata": {
                    "default": {},
                    "allOf": [{"$ref": P + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                },
                "spec": {"default": {}, "allOf": [{"$ref": P + "io.k8s.api.core.v1.PodSpec"}]},
            },
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
            "type": "object",
            "properties": {"uid": {"type": "string"}},
        },
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {
            "oneOf": [{"type": "string"}, {"type": "number"}]
        },
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
            "format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}],
        },
    }
    base.update({k.replace("_", "."): v for k, v in schemas.items()})
    return {"components": {"schemas": base}}


def _pod_spec(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"io_k8s_api_core_v1_PodSpec": {"type": "object", "properties": props, **extra}}


def test_special_types_and_dropped_keys() -> None:
    doc = _doc(
        **_pod_spec(
            {
                "limits": {
                    "type": "object",
                    "additionalProperties": {
                        "allOf": [{"$ref": P + "io.k8s.apimachinery.pkg.api.resource.Quantity"}]
                    },
                },
                "port": {
                    "allOf": [{"$ref": P + "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]
                },
                "policy": {
                    "type": "string",
                    "enum": ["A", "B"],
                    "default": "A",
                    "description": "x",
                },
                "n": {"type": "integer", "format": "int32"},
                "ip": {"type": "string", "format": "ipv4-weird"},
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-patch-strategy": "merge",
                    "x-kubernetes-list-type": "atomic",
                },
            },
            required=["n"],
        )
    )
    out = pod_template_spec_schema(doc)
    assert out["properties"]["metadata"]["properties"].keys() == {
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    }
    spec = out["properties"]["spec"]
    assert spec["required"] == ["n"]
    p = spec["properties"]
    assert p["limits"]["additionalProperties"]["pattern"] == QUANTITY_PATTERN
    assert p["limits"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert p["port"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    assert p["policy"] == {"type": "string"}
    assert p["n"] == {"type": "integer", "format": "int32"}
    assert p["ip"] == {"type": "string"}
    assert p["names"] == {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "atomic",
    }
    assert "description" not in out


def test_list_map_key_default_kept_or_list_made_atomic() -> None:
    item = {
        "type": "object",
        "required": ["port"],
        "properties": {
            "port": {"type": "integer", "default": 0},
            "protocol": {"type": "string", "default": "TCP"},
            "other": {"type": "string"},
        },
    }
    doc = _doc(
        **_pod_spec(
            {
                "ports": {
                    "type": "array",
                    "items": item,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                },
                "bad": {
                    "type": "array",
                    "items": item,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "other"],
                },
            }
        )
    )
    p = pod_template_spec_schema(doc)["properties"]["spec"]["properties"]
    assert p["ports"]["x-kubernetes-list-type"] == "map"
    assert p["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
    assert "default" not in p["ports"]["items"]["properties"]["port"]
    assert p["bad"]["x-kubernetes-list-type"] == "atomic"
    assert "x-kubernetes-list-map-keys" not in p["bad"]


def test_recursion_and_unknown_refs_are_errors() -> None:
    loop = {
        "type": "object",
        "properties": {"self": {"allOf": [{"$ref": P + "io.k8s.api.core.v1.PodSpec"}]}},
    }
    with pytest.raises(SchemaConversionError, match="recursive"):
        pod_template_spec_schema(_doc(io_k8s_api_core_v1_PodSpec=loop))
    dangling = {"type": "object", "properties": {"x": {"$ref": P + "nope"}}}
    with pytest.raises(SchemaConversionError, match="unresolved"):
        pod_template_spec_schema(_doc(io_k8s_api_core_v1_PodSpec=dangling))
    with pytest.raises(SchemaConversionError):
        pod_template_spec_schema({"openapi": "3.0.0"})


def test_stored_schema_looks_like_a_pod_template() -> None:
    version, schema = crds.load_pod_template_schema()
    assert version.startswith("v1.")
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["containers"]
    container = spec["properties"]["containers"]["items"]
    assert container["required"] == ["name"]
    assert container["properties"]["image"] == {"type": "string"}
    limits = container["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
