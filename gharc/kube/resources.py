"""What the client needs to know about a kind: its REST path, and nothing else.

The REST path of a resource is ``/api/v1`` for the core group and ``/apis/{group}/{version}``
otherwise, then ``namespaces/{ns}`` for namespaced kinds. We never use discovery: every kind
gharc touches is known at import time, and discovery costs a round trip per group at start-up
for information we already have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = [
    "CONFIG_MAPS",
    "CUSTOM_RESOURCE_DEFINITIONS",
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "NAMESPACES",
    "PODS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICE_ACCOUNTS",
    "Resource",
    "register",
    "resource_for",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """A kind as the REST API sees it; hashable so it can key informers and caches."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    subresources: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``group/version`` otherwise (as in ``apiVersion``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of the collection, or of one object and optionally its subresource.

        ``namespace=None`` on a namespaced kind addresses all namespaces (list and watch only).
        """
        parts = [self.base_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        elif not self.namespaced and namespace:
            raise ValueError(f"{self.plural} is cluster-scoped; got namespace {namespace!r}")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError(f"empty name for {self.plural}")
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        elif subresource:
            raise ValueError("a subresource needs a name")
        return "/".join(parts)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """True when ``obj`` (a dict with apiVersion and kind) is of this kind."""
        return obj.get("kind") == self.kind and obj.get("apiVersion") == self.api_version

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @classmethod
    def custom(
        cls,
        group: str,
        version: str,
        kind: str,
        plural: str | None = None,
        *,
        namespaced: bool = True,
        status: bool = True,
    ) -> Resource:
        """Declare a CRD kind; ``plural`` defaults to the lower-cased kind plus ``s``."""
        return cls(
            group,
            version,
            kind,
            plural or kind.lower() + "s",
            namespaced,
            frozenset({"status"}) if status else frozenset(),
        )


_STATUS = frozenset({"status"})

PODS = Resource("", "v1", "Pod", "pods", True, _STATUS)
SECRETS = Resource("", "v1", "Secret", "secrets")
SERVICE_ACCOUNTS = Resource("", "v1", "ServiceAccount", "serviceaccounts")
CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps")
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", False, _STATUS)
NODES = Resource("", "v1", "Node", "nodes", False, _STATUS)
EVENTS = Resource("", "v1", "Event", "events")
EVENTS_V1 = Resource("events.k8s.io", "v1", "Event", "events")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "Role", "roles")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False
)

_KNOWN: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (
        PODS,
        SECRETS,
        SERVICE_ACCOUNTS,
        CONFIG_MAPS,
        NAMESPACES,
        EVENTS,
        ROLES,
        ROLE_BINDINGS,
        LEASES,
        CUSTOM_RESOURCE_DEFINITIONS,
    )
}


def register(*resources: Resource) -> None:
    """Make an application's own kinds (its CRDs) known to :func:`resource_for`.

    This module knows only Kubernetes' kinds; an application declares its own with its API
    and registers them from there, so the client core stays free of any one application.
    """
    for r in resources:
        _KNOWN[(r.api_version, r.kind)] = r


def resource_for(api_version: str, kind: str) -> Resource:
    """The well-known Resource for an apiVersion/kind pair; KeyError for anything else."""
    return _KNOWN[(api_version, kind)]
