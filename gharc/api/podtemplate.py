"""Turn the API server's OpenAPI v3 ``PodTemplateSpec`` into a structural CRD schema.

ARC embeds ``corev1.PodTemplateSpec`` in its CRDs (controller-gen writes the whole pod
schema into each). Validating runner templates the same way matters: a typo such as
``containers: {name: x}`` or ``resources.limits.cpu: [1]`` must be rejected when the user
applies the AutoscalingRunnerSet, not minutes later when the first runner pod fails.

We do not hand-write the ~100 pod types. We read them from a real kube-apiserver
(``GET /openapi/v3/api/v1``) and convert, following controller-gen's conventions so the
result validates what ARC's CRDs validate:

- ``$ref``/``allOf`` wrappers are inlined (CRD schemas cannot reference).
- ``ObjectMeta`` becomes the five fields controller-gen's ``generateEmbeddedObjectMeta``
  keeps (``name``, ``namespace``, ``labels``, ``annotations``, ``finalizers``).
- ``Quantity`` and ``IntOrString`` become ``x-kubernetes-int-or-string`` (Quantity with
  its pattern), ``Time`` a ``date-time`` string.
- Descriptions, ``enum`` lists and the strategic-merge extensions
  (``x-kubernetes-patch-*``, ``x-kubernetes-unions``) are dropped. Enums are dropped
  because ARC's CRDs do not carry them: an enum frozen from one Kubernetes version would
  reject a newer value that the pod API accepts. Descriptions are dropped for size (five
  embedded pod schemas with Kubernetes' text would approach etcd's object size limit);
  the CRD generator gives each pod field a short pointer to ``kubectl explain pod...``.
- Defaults are kept where controller-gen writes them (the API types' ``+default``
  markers): a scalar default of an optional field without an enum (``name: ""`` of an
  object reference, ``fsType: ext4``, ``grpc.service: ""``). The OpenAPI document also
  carries zero-value defaults of required fields, of list items and of whole structs
  (``{}``); those are not in ARC's CRDs and are dropped, so the stored template stays
  what the user wrote.
- A list-map key that is not required must have a default in a CRD (``ports`` keyed by
  ``containerPort`` + ``protocol``: ``protocol`` defaults to ``TCP``). A key with neither
  makes the list ``atomic`` instead.
- Two controller-gen conventions the OpenAPI document does not show are applied by type
  name: structs that embed ``LocalObjectReference`` inherit its ``atomic`` map type, and
  ``ResourceRequirements.claims`` stays a plain list as in ARC's CRDs (newer API versions
  key it by ``name``; keying it would refuse ARC objects with a repeated claim name).
- Only ``format`` values the CRD validator knows are kept.
"""

from __future__ import annotations

import copy
from typing import Any

Schema = dict[str, Any]

POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"

#: The Quantity grammar (apimachinery ``resource.Quantity``) as one regular expression:
#: signed decimal number, then a binary SI, decimal SI or exponent suffix.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

#: Formats the apiextensions validator accepts and that appear in the pod schema.
_KEPT_FORMATS = frozenset({"int32", "int64", "float", "double", "byte", "date-time"})
#: Keys copied verbatim from the OpenAPI node (after inlining).
_KEPT_KEYS = frozenset(
    {
        "type",
        "required",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-int-or-string",
        "x-kubernetes-embedded-resource",
    }
)


class SchemaConversionError(ValueError):
    """The OpenAPI document has a shape this converter does not understand."""


def int_or_string() -> Schema:
    """Schema of ``intstr.IntOrString`` as CRDs spell it."""
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def quantity() -> Schema:
    """Schema of ``resource.Quantity`` as controller-gen writes it."""
    return {**int_or_string(), "pattern": QUANTITY_PATTERN}


def string_map() -> Schema:
    """``map[string]string``."""
    return {"type": "object", "additionalProperties": {"type": "string"}}


def embedded_object_meta() -> Schema:
    """ObjectMeta fields a template may carry (controller-gen ``generateEmbeddedObjectMeta``)."""
    return {
        "type": "object",
        "properties": {
            "annotations": string_map(),
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": string_map(),
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


#: Types whose Go struct embeds ``LocalObjectReference`` (``+structType=atomic``), which
#: controller-gen propagates to the embedding struct; the OpenAPI document does not.
_EMBEDS_LOCAL_OBJECT_REFERENCE = frozenset(
    f"io.k8s.api.core.v1.{name}"
    for name in (
        "ConfigMapEnvSource",
        "SecretEnvSource",
        "ConfigMapVolumeSource",
        "ConfigMapProjection",
        "SecretProjection",
    )
)
_RESOURCE_REQUIREMENTS = "io.k8s.api.core.v1.ResourceRequirements"

_SPECIAL: dict[str, Schema] = {
    _OBJECT_META: embedded_object_meta(),
    _QUANTITY: quantity(),
    _INT_OR_STRING: int_or_string(),
    _TIME: {"type": "string", "format": "date-time"},
    _MICRO_TIME: {"type": "string", "format": "date-time"},
}


class _Converter:
    def __init__(self, schemas: dict[str, Schema]) -> None:
        self._schemas = schemas
        self._done: dict[str, Schema] = {}
        self._stack: list[str] = []

    def ref(self, ref: str) -> Schema:
        name = ref.rsplit("/", 1)[-1]
        if name in _SPECIAL:
            return copy.deepcopy(_SPECIAL[name])
        if name in self._done:
            return copy.deepcopy(self._done[name])
        if name in self._stack:
            raise SchemaConversionError(f"recursive schema {' -> '.join([*self._stack, name])}")
        if name not in self._schemas:
            raise SchemaConversionError(f"unresolved $ref {ref}")
        self._stack.append(name)
        try:
            out = self.node(self._schemas[name], name)
        finally:
            self._stack.pop()
        if name in _EMBEDS_LOCAL_OBJECT_REFERENCE:
            out["x-kubernetes-map-type"] = "atomic"
        if name == _RESOURCE_REQUIREMENTS and "claims" in out.get("properties", {}):
            claims = out["properties"]["claims"]
            claims.pop("x-kubernetes-list-type", None)
            claims.pop("x-kubernetes-list-map-keys", None)
        self._done[name] = out
        return copy.deepcopy(out)

    def node(self, src: Schema, where: str) -> Schema:
        if "$ref" in src:
            return self.ref(src["$ref"])
        all_of = src.get("allOf")
        if all_of:
            if len(all_of) != 1 or "$ref" not in all_of[0]:
                raise SchemaConversionError(f"{where}: allOf other than a single $ref")
            out = self.ref(all_of[0]["$ref"])
            # Sibling keys of the wrapper (a default, list markers) apply to the target.
            for key in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
                if key in src:
                    out[key] = src[key]
            if "default" in src:
                out["_default"] = src["default"]
            return out
        if "oneOf" in src or "anyOf" in src:
            raise SchemaConversionError(f"{where}: unexpected oneOf/anyOf outside Quantity")

        out = {k: copy.deepcopy(v) for k, v in src.items() if k in _KEPT_KEYS}
        fmt = src.get("format")
        if fmt in _KEPT_FORMATS:
            out["format"] = fmt
        if "default" in src:
            out["_default"] = src["default"]
        if "enum" in src:
            out["_enum"] = True
        if "properties" in src:
            out["properties"] = {
                k: self.node(v, f"{where}.{k}") for k, v in sorted(src["properties"].items())
            }
        if "items" in src:
            out["items"] = self.node(src["items"], f"{where}[]")
        extra = src.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = self.node(extra, f"{where}{{}}")
        elif extra is not None:
            raise SchemaConversionError(f"{where}: boolean additionalProperties")
        if "type" not in out and not out.get("x-kubernetes-int-or-string"):
            if "properties" in out:
                out["type"] = "object"
            else:
                raise SchemaConversionError(f"{where}: no type")
        return out


def _finish(node: Schema) -> Schema:
    """Resolve the private ``_default``/``_enum`` markers (see the module docstring)."""
    node.pop("_default", None)
    node.pop("_enum", None)
    required = set(node.get("required") or [])
    for name, child in (node.get("properties") or {}).items():
        default = child.get("_default")
        if (
            name not in required
            and default is not None
            and not isinstance(default, (dict, list))
            and not child.get("_enum")
        ):
            child["default"] = default
        _finish(child)
    if isinstance(node.get("additionalProperties"), dict):
        _finish(node["additionalProperties"])
    items = node.get("items")
    if isinstance(items, dict):
        if node.get("x-kubernetes-list-type") == "map":
            _fix_list_map_keys(node, items)
        _finish(items)
    return node


def _fix_list_map_keys(array: Schema, items: Schema) -> None:
    keys: list[str] = array.get("x-kubernetes-list-map-keys") or []
    required = set(items.get("required") or [])
    props = items.get("properties") or {}
    for key in keys:
        if key in required:
            continue
        prop = props.get(key)
        if prop is not None and ("_default" in prop or "default" in prop):
            prop["default"] = prop.pop("_default", prop.get("default"))
            continue
        # Neither required nor defaulted: a CRD cannot key a list map on it.
        array["x-kubernetes-list-type"] = "atomic"
        array.pop("x-kubernetes-list-map-keys", None)
        return


def pod_template_spec_schema(openapi_v3: dict[str, Any]) -> Schema:
    """The structural CRD schema of ``PodTemplateSpec`` from an ``/openapi/v3/api/v1`` document."""
    try:
        schemas = openapi_v3["components"]["schemas"]
    except (KeyError, TypeError) as exc:
        raise SchemaConversionError("not an OpenAPI v3 document with components.schemas") from exc
    if POD_TEMPLATE_SPEC not in schemas:
        raise SchemaConversionError(f"{POD_TEMPLATE_SPEC} missing (not the api/v1 document?)")
    out = _Converter(schemas).ref(f"#/components/schemas/{POD_TEMPLATE_SPEC}")
    return _finish(out)
