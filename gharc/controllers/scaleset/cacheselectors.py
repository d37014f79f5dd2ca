"""What the scale set controllers cache of the core kinds: their own objects only.

Pods and ServiceAccounts were cached cluster-wide and unselected, so the controller held
every pod of the cluster in memory (on a shared cluster, most of its memory) and decoded
every pod change. It reads only runner pods, listener pods and listener ServiceAccounts,
and each carries a label that the builders compute and a user's metadata cannot replace:

* runner pods: ``actions-ephemeral-runner=True`` (set after the template's labels);
* listener pods and ServiceAccounts: ``app.kubernetes.io/component=runner-scale-set-listener``
  (a computed key of the listener's labels, which win over user metadata).

The two pod selectors share no label, so pods are cached through one informer with two
list+watches (see :class:`gharc.kube.informer.Informer`). Cached pods keep no spec
(:func:`slim_pod`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gharc.api.scaleset import constants as c
from gharc.kube.resources import PODS, SERVICE_ACCOUNTS, Resource

__all__ = ["LISTENER_OBJECTS", "RUNNER_PODS", "cache_selectors", "cache_transforms", "slim_pod"]

RUNNER_PODS = f"{c.LABEL_EPHEMERAL_RUNNER}={c.LABEL_VALUE_EPHEMERAL_RUNNER}"
LISTENER_OBJECTS = f"{c.LABEL_COMPONENT}={c.COMPONENT_LISTENER}"


def cache_selectors() -> dict[Resource, str | tuple[str, ...]]:
    """The manager's ``label_selectors`` for scale set mode."""
    return {PODS: (RUNNER_PODS, LISTENER_OBJECTS), SERVICE_ACCOUNTS: LISTENER_OBJECTS}


#: The pod fields the reconcilers read: identity, owners, deletion, and the status.
_POD_SPEC_KEPT = ("nodeName",)


def slim_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """A cached pod without ``managedFields`` and without its spec (the runner and
    listener reconcilers judge a pod by its metadata and status; the spec of a runner pod,
    with its env and volumes, was most of its size)."""
    meta = obj.get("metadata")
    if meta and "managedFields" in meta:
        del meta["managedFields"]
    spec = obj.get("spec")
    if isinstance(spec, dict):
        obj["spec"] = {k: spec[k] for k in _POD_SPEC_KEPT if k in spec}
    return obj


def cache_transforms() -> dict[Resource, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The manager's ``transforms`` for scale set mode."""
    return {PODS: slim_pod}
