"""Import kubernetes_asyncio's transport without its thousand generated model classes.

``import kubernetes_asyncio`` runs the package's ``__init__``, which imports every API
group's API and model classes: about 60 MiB of resident memory in a process that never
builds a model (gharc speaks plain dicts, see :mod:`gharc.kube.client`). We need only the
ApiClient (session, auth, TLS), the Configuration and the kubeconfig / in-cluster loaders.

:func:`install` registers the two packages ``kubernetes_asyncio`` and
``kubernetes_asyncio.client`` and the ``models`` module *without running them*, so their
submodules import on their own; it puts ``ApiClient`` and ``Configuration`` where the
loaders look for them. Any other attribute of those modules (``client.CoreV1Api``, a model
the ApiClient deserialises into) runs the real module on first use, so code that wants the
whole library (tests, the demo) still gets it, at the old price, only when it asks.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["install"]

_LAZY = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


def _unexecuted(name: str, path: list[str] | None) -> ModuleType | None:
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def load_on_demand(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        del module.__dict__["__getattr__"]
        loader.exec_module(module)  # the real module, in place
        return getattr(module, attr)

    module.__dict__["__getattr__"] = load_on_demand
    return module


def install() -> None:
    """Register the lazy modules, unless kubernetes_asyncio is imported already."""
    if any(name in sys.modules for name in _LAZY):
        return
    parent_path: list[str] | None = None
    parent: ModuleType | None = None
    for name in _LAZY:
        module = _unexecuted(name, parent_path)
        if module is None:  # pragma: no cover - an unusual install: import it whole
            return
        sys.modules[name] = module
        if parent is not None:
            setattr(parent, name.rpartition(".")[2], module)
        parent, parent_path = module, list(getattr(module, "__path__", []) or [])
    client = sys.modules["kubernetes_asyncio.client"]
    # NB: submodules first, so that ``from kubernetes_asyncio.client import rest`` finds an
    # attribute instead of asking the lazy module (which would load everything).
    importlib.import_module("kubernetes_asyncio.client.exceptions")
    importlib.import_module("kubernetes_asyncio.client.configuration")
    importlib.import_module("kubernetes_asyncio.client.rest")
    from kubernetes_asyncio.client.api_client import ApiClient
    from kubernetes_asyncio.client.configuration import Configuration

    client.ApiClient = ApiClient  # type: ignore[attr-defined]
    client.Configuration = Configuration  # type: ignore[attr-defined]
