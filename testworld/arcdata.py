"""ARC's own charts' values files and CRDs, as inputs of the compatibility tests.

They live outside the repository (``../shared/arc`` next to the checkout, or
``$GHARC_ARC_DATA``) because they are ARC's files, not ours: the tests read them to prove
that what ARC accepts, gharc accepts. :func:`arc_data_dir` says why they are missing
instead of returning ``None``, so a test skips with a reason a human can act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testworld.helm import ROOT

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ArcDataMissing(RuntimeError):
    """ARC's data files are not on this machine; the message says where they were looked for."""


def arc_data_dir() -> Path:
    """The folder holding ARC's ``charts/`` and ``config/crd/bases/``."""
    given = os.environ.get("GHARC_ARC_DATA", "").strip()
    path = Path(given) if given else ROOT.parent / "shared" / "arc"
    if not (path / "config" / "crd" / "bases").is_dir():
        raise ArcDataMissing(f"ARC's data files not found in {path} (set GHARC_ARC_DATA)")
    return path


def arc_crds(group: str | None = None) -> list[dict[str, Any]]:
    """ARC's generated CRDs (``config/crd/bases``), optionally of one API group only."""
    out = []
    for path in sorted((arc_data_dir() / "config" / "crd" / "bases").glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader):
            if doc and (group is None or doc["spec"]["group"] == group):
                out.append(doc)
    return out


def values_files() -> list[Path]:
    """Every ``values*.yaml`` of ARC's charts, sorted."""
    return sorted((arc_data_dir() / "charts").glob("**/values*.yaml"))


# --- schema comparison -------------------------------------------------------------------

#: Keywords that can only reject objects: ours may not have one ARC's lacks.
RESTRICTING = (
    "required",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "enum",
    "format",
    "x-kubernetes-validations",
)


@dataclass
class SchemaDiff:
    """Where gharc's schema departs from ARC's, by kind of departure."""

    stricter: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [*self.stricter, *self.missing, *self.different]


def compare_schemas(arc: dict[str, Any], ours: dict[str, Any], path: str = "") -> SchemaDiff:
    """Compare two ``openAPIV3Schema`` trees: would ours accept (and store) what ARC's does?

    Allowed departures, all of which accept more: a property ARC lacks; ``nullable`` where
    ARC's is not; ``x-kubernetes-preserve-unknown-fields`` where ARC spells the fields out;
    a plain list where ARC keys it (``x-kubernetes-list-type: map``; ARC's generated
    schemas key ``resources.claims`` in some templates and not in others).
    """
    diff = SchemaDiff()
    _compare(arc, ours, path, diff)
    return diff


def _compare(arc: dict[str, Any], ours: dict[str, Any], path: str, diff: SchemaDiff) -> None:
    where = path or "."
    for key in RESTRICTING:
        if key not in ours:
            continue
        a, o = arc.get(key), ours[key]
        if key == "required":
            extra = sorted(set(o) - set(a or []))
            if extra:
                diff.stricter.append(f"{where}: required {extra}")
        elif a != o:
            diff.stricter.append(f"{where}: {key} {o!r} (ARC: {a!r})")
    for key in ("type", "default", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource"):
        if arc.get(key) != ours.get(key):
            diff.different.append(f"{where}: {key} {ours.get(key)!r} (ARC: {arc.get(key)!r})")
    if arc.get("nullable") and not ours.get("nullable"):
        diff.different.append(f"{where}: not nullable (ARC: nullable)")
    if arc.get("x-kubernetes-map-type") != ours.get("x-kubernetes-map-type"):
        diff.different.append(
            f"{where}: map type {ours.get('x-kubernetes-map-type')!r} "
            f"(ARC: {arc.get('x-kubernetes-map-type')!r})"
        )
    a_list, o_list = arc.get("x-kubernetes-list-type"), ours.get("x-kubernetes-list-type")
    plain_for_keyed = a_list == "map" and o_list is None
    if not plain_for_keyed and (
        a_list != o_list
        or arc.get("x-kubernetes-list-map-keys") != ours.get("x-kubernetes-list-map-keys")
    ):
        diff.different.append(
            f"{where}: list type {o_list!r} {ours.get('x-kubernetes-list-map-keys')} "
            f"(ARC: {a_list!r} {arc.get('x-kubernetes-list-map-keys')})"
        )
    preserves = bool(ours.get("x-kubernetes-preserve-unknown-fields"))
    if arc.get("x-kubernetes-preserve-unknown-fields") and not preserves:
        diff.stricter.append(f"{where}: prunes unknown fields (ARC keeps them)")
    ours_props = ours.get("properties") or {}
    for name, sub in (arc.get("properties") or {}).items():
        if name in ours_props:
            _compare(sub, ours_props[name], f"{path}.{name}", diff)
        elif not preserves:
            diff.missing.append(f"{path}.{name}: missing (pruned on write)")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        a_sub, o_sub = arc.get(key), ours.get(key)
        if isinstance(a_sub, dict):
            if isinstance(o_sub, dict):
                _compare(a_sub, o_sub, path + suffix, diff)
            elif not preserves:
                diff.missing.append(f"{path}{suffix}: missing")


def schema_of(crd: dict[str, Any], version: str = "v1alpha1") -> dict[str, Any]:
    """The ``openAPIV3Schema`` of one served version of a CRD."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(f"{crd['metadata']['name']} has no version {version}")


def walk_properties(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named property below ``schema`` (through items and maps), with its path."""
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{name}"
        yield here, sub
        yield from walk_properties(sub, here)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield from walk_properties(sub, path + suffix)
