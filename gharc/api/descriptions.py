"""Field descriptions of the CRDs, so ``kubectl explain`` says what each field is for.

Two sources, applied by the generator after the schemas are built:

- Fields gharc defines get text from a per-group table (``gharc.api.scaleset.descriptions``)
  looked up by full path (``.spec.minRunners``), then by ``parent.name``
  (``proxy.noProxy``), then by the field name alone (``labels``).
- Fields of an embedded pod template point at the pod API's own documentation
  (``kubectl explain pod.spec.containers.image``). Copying Kubernetes' text into each of
  the five embedded templates would push the CRDs towards etcd's object size limit, and
  the pointer always matches the cluster's Kubernetes version.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from gharc.api.podtemplate import Schema

#: The API server refuses anything but a type on a CRD's root ``metadata`` (kubectl explain
#: shows ObjectMeta's own documentation there).
ROOT_EXEMPT = frozenset({".metadata"})


class MissingDescription(ValueError):
    """A field has no description; the message lists every such path."""


def with_pod_pointers(pod_template: Schema) -> Schema:
    """A copy of the ``PodTemplateSpec`` schema where every field names its pod field."""
    out = copy.deepcopy(pod_template)
    _point(out, "pod")
    return out


def _point(node: Schema, path: str) -> None:
    for name, sub in (node.get("properties") or {}).items():
        here = f"{path}.{name}"
        sub.setdefault("description", f"Pod field: see `kubectl explain {here}`.")
        _point(sub, here)
    items = node.get("items")
    if isinstance(items, dict):
        _point(items, path)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        _point(extra, path)


def apply(schema: Schema, table: Mapping[str, str], *, strict: bool = True) -> list[str]:
    """Describe every property of ``schema`` that has no description yet, from ``table``.

    Returns the paths left without one; with ``strict`` raises instead, so a new field
    cannot be added without saying what it is for.
    """
    missing: list[str] = []
    _describe(schema, "", "", table, missing)
    if strict and missing:
        raise MissingDescription("fields without a description: " + ", ".join(missing))
    return missing


def _describe(
    node: Schema, path: str, parent: str, table: Mapping[str, str], missing: list[str]
) -> None:
    for name, sub in (node.get("properties") or {}).items():
        here = f"{path}.{name}"
        if here in ROOT_EXEMPT:
            continue
        if not sub.get("description"):
            text = table.get(here) or table.get(f"{parent}.{name}") or table.get(name)
            if text:
                sub["description"] = text
            else:
                missing.append(here)
        _describe(sub, here, name, table, missing)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        sub = node.get(key)
        if isinstance(sub, dict):
            _describe(sub, path + suffix, parent, table, missing)
