"""The CRD manifests gharc ships, as package data, and a loader for them.

Files named ``<group>_<plural>.yaml`` are the CRDs (ready for ``kubectl apply -f``), one per
file, as controller-gen lays them out. They are build artifacts of
``python -m gharc.api.generate``; edit the Python definitions, not the YAML.
``_podtemplatespec.yaml`` is the pod template schema read from a real API server; it is an
input of the generator, not a manifest, so the loader never returns it.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any, Literal

import yaml

Group = Literal["scaleset", "legacy", "all"]

#: API group of each selectable CRD group.
GROUPS: dict[str, str] = {
    "scaleset": "actions.github.com",
    "legacy": "actions.summerwind.dev",
}

POD_TEMPLATE_FILE = "_podtemplatespec.yaml"

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _dir() -> Any:
    return resources.files(__name__)


def manifest_files(group: str) -> list[str]:
    """Names of the CRD files of an API group (``actions.github.com``), sorted."""
    prefix = f"{group}_"
    return sorted(
        entry.name
        for entry in _dir().iterdir()
        if entry.name.startswith(prefix) and entry.name.endswith(".yaml")
    )


@functools.cache
def _parse(name: str) -> tuple[dict[str, Any], ...]:
    text = (_dir() / name).read_text(encoding="utf-8")
    return tuple(doc for doc in yaml.load_all(text, Loader=_Loader) if doc)


def load(group: Group | str = "scaleset") -> list[dict[str, Any]]:
    """The CRDs of ``group`` (``scaleset``, ``legacy`` or ``all``) as fresh dicts.

    A group whose manifests have not been written yet yields an empty list rather than an
    error, so test fixtures and ``gharc crds`` keep working while the API grows. Each call
    returns deep copies: callers may mutate what they get.
    """
    if group == "all":
        names = [n for g in GROUPS.values() for n in manifest_files(g)]
    elif group in GROUPS:
        names = manifest_files(GROUPS[group])
    else:
        raise ValueError(f"unknown CRD group {group!r}; expected one of scaleset, legacy, all")
    return [copy.deepcopy(doc) for name in names for doc in _parse(name)]


def load_pod_template_schema() -> tuple[str, dict[str, Any]]:
    """The stored ``PodTemplateSpec`` schema and the Kubernetes version it was read from."""
    data = _parse(POD_TEMPLATE_FILE)[0]
    return str(data["kubernetesVersion"]), copy.deepcopy(data["podTemplateSpec"])


def dump(docs: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream (``---`` separated) for ``kubectl apply -f -``."""
    return "".join("---\n" + render_yaml(doc) for doc in docs)


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_Dumper):
    """Never emit ``&id``/``*id`` anchors: kubectl users read these files."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_yaml(doc: Any) -> str:
    """Deterministic YAML of one document, as the generator writes it."""
    return yaml.dump(
        doc,
        Dumper=_NoAliasDumper,
        sort_keys=False,
        default_flow_style=False,
        width=100,
        allow_unicode=True,
    )
