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
(:func:`slim_pod`), and EphemeralRunners of one set share one spec (:class:`SharedSpecs`).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.kube.informer import compact
from gharc.kube.resources import NODES, PODS, SERVICE_ACCOUNTS, Resource

__all__ = [
    "LISTENER_OBJECTS",
    "RUNNER_PODS",
    "SharedSpecs",
    "cache_selectors",
    "cache_transforms",
    "slim_pod",
]

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
    return compact(obj)


class SharedSpecs:
    """A transform that gives cached objects with equal specs one shared spec object.

    Every EphemeralRunner of a set carries the same spec (the runner pod template and the
    GitHub settings), about half of its cached size; a thousand runners over fifty sets
    need fifty specs. Cached objects are never mutated (reconcilers copy them), which is
    what makes sharing safe. The table of specs is bounded (oldest forgotten first).
    """

    def __init__(self, limit: int = 512) -> None:
        self.limit = limit
        self._specs: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = compact(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return obj
        text = json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()
        key = hashlib.blake2b(text, digest_size=16).digest()
        shared = self._specs.get(key)
        if shared is None:
            self._specs[key] = spec
            if len(self._specs) > self.limit:
                self._specs.popitem(last=False)
        else:
            self._specs.move_to_end(key)
            obj["spec"] = shared
        return obj


def cache_transforms() -> dict[Resource, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The manager's ``transforms`` for scale set mode."""
    from gharc.controllers.scaleset.nodeloss import slim_node  # nodeloss imports the reconcilers

    return {PODS: slim_pod, EPHEMERAL_RUNNERS: SharedSpecs(), NODES: slim_node}
