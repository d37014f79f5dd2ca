"""The pieces both API groups build their CRDs from: the CRD object, its root schema,
object schemas and printer columns.

The scale set and the legacy CRDs are single-version, namespaced and have a status
subresource, as ARC's are. Building them from one function keeps the two groups' YAML in
the same shape (key order, sorted properties), so a generator or schema change reaches
both at once and the golden files differ only where the groups really do.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from gharc.api.podtemplate import Schema

CRD_API_VERSION = "apiextensions.k8s.io/v1"


def object_schema(properties: dict[str, Schema], required: list[str] | None = None) -> Schema:
    """An object with ``properties`` (sorted, as controller-gen writes them)."""
    out: Schema = {"type": "object", "properties": dict(sorted(properties.items()))}
    if required:
        out["required"] = sorted(required)
    return out


def root_schema(spec: Schema, status: Schema, required: list[str] | None = None) -> Schema:
    """The top of a CRD's schema: type meta, opaque metadata, ``spec`` and ``status``."""
    return object_schema(
        {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        required=required,
    )


def printer_column(name: str, path: str, kind: str) -> dict[str, str]:
    """One ``additionalPrinterColumns`` entry (what ``kubectl get`` shows)."""
    return {"jsonPath": path, "name": name, "type": kind}


def crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    schema: Schema,
    columns: list[dict[str, str]],
    short_names: Sequence[str] = (),
) -> dict[str, Any]:
    """One namespaced, single-version CRD with the status subresource (as ARC's)."""
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced",
            "versions": [
                {
                    "additionalPrinterColumns": copy.deepcopy(columns),
                    "name": version,
                    "schema": {"openAPIV3Schema": schema},
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                }
            ],
        },
    }
