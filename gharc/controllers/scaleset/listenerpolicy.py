"""What an AutoscalingRunnerSet's ``listenerTemplate`` may change in its listener pod.

The listener pod runs in the controller's namespace, not the scale set's: whoever may
create a scale set in any namespace would otherwise reach that namespace through the
template (host namespaces, privileged containers, ``hostPath`` volumes, the Secrets of
other scale sets' listeners, the controller's service accounts). So by default a template
may only touch fields that can neither raise privilege nor name another object:

- ``metadata.labels`` and ``metadata.annotations`` (not the AppArmor/seccomp annotations);
- ``spec.nodeSelector``, ``tolerations``, ``affinity``, ``topologySpreadConstraints``,
  ``priorityClassName``;
- ``spec.securityContext`` and the ``listener`` container's ``securityContext``, only to
  make them stricter than :data:`RESTRICTED_POD_SECURITY_CONTEXT` /
  :data:`RESTRICTED_CONTAINER_SECURITY_CONTEXT` (the Pod Security ``restricted`` profile);
- ``spec.imagePullSecrets`` naming only the controller's own pull secrets;
- the ``listener`` container's ``resources``, ``imagePullPolicy`` and ``env`` (values, or
  ``fieldRef``/``resourceFieldRef``; never a Secret or ConfigMap).

Everything else is a :class:`Violation` naming its JSON path. Pure functions, no I/O:
the ARS reconciler refuses a scale set with violations before creating anything, the
listener reconciler refuses an AutoscalingListener written directly with them, and the pod
builder raises rather than build such a pod. ``--allow-unrestricted-listener-template``
turns all of this off for single-tenant clusters.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gharc.api.scaleset import constants as c

#: The uid/gid of the gharc image (``USER 1001:1001`` in the Dockerfile).
LISTENER_UID = 1001

#: Pod-level security context of every listener pod (Pod Security ``restricted``).
RESTRICTED_POD_SECURITY_CONTEXT: Mapping[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": LISTENER_UID,
    "runAsGroup": LISTENER_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
#: Security context of the ``listener`` container (Pod Security ``restricted``).
RESTRICTED_CONTAINER_SECURITY_CONTEXT: Mapping[str, Any] = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
}

_METADATA_ALLOWED = frozenset({"labels", "annotations"})
#: Annotations that set a security profile (older, annotation-based API): never allowed.
_PROFILE_ANNOTATION_PREFIXES = (
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
)
#: Pod spec fields a template may set freely (scheduling only).
_SPEC_FREE = frozenset(
    {"nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"}
)
#: ``listener`` container fields a template may set freely.
_CONTAINER_FREE = frozenset({"name", "resources", "imagePullPolicy"})
_SAFE_VALUE_FROM = frozenset({"fieldRef", "resourceFieldRef"})
_SAFE_PROFILE_TYPES = frozenset({"RuntimeDefault", "Localhost"})


@dataclass(frozen=True)
class Violation:
    """One forbidden field: its JSON path (``listenerTemplate.spec.hostPID``) and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ListenerTemplateForbidden(ValueError):
    """A listener template with violations reached a place that must not build it."""

    def __init__(self, violations: Iterable[Violation]) -> None:
        self.violations = list(violations)
        super().__init__(describe(self.violations))


def describe(violations: Iterable[Violation]) -> str:
    """One line for ``status.message`` and the Warning event, every field named."""
    return "; ".join(str(v) for v in violations)


def _unset(value: Any) -> bool:
    """Zero values that change nothing (``hostPID: false``, ``volumes: []``) are let through."""
    return value is None or value is False or value == [] or value == {}


def template_violations(
    template: Mapping[str, Any] | None,
    *,
    allowed_pull_secrets: Collection[str] = (),
    root: str = "listenerTemplate",
) -> list[Violation]:
    """Every field of ``template`` the restricted listener policy refuses ([] when none).

    ``allowed_pull_secrets`` are the controller's own listener pull secrets
    (``--auto-scaler-image-pull-secrets``); any other name would let a tenant use a Secret
    of the controller's namespace.
    """
    if not template:
        return []
    out: list[Violation] = []
    for key, value in template.items():
        if key == "metadata":
            out += _metadata(value or {}, f"{root}.metadata")
        elif key == "spec":
            out += _pod_spec(value or {}, f"{root}.spec", allowed_pull_secrets)
        elif not _unset(value):
            out.append(Violation(f"{root}.{key}", "not allowed"))
    return out


def _metadata(meta: Mapping[str, Any], path: str) -> list[Violation]:
    out: list[Violation] = []
    for key, value in meta.items():
        if key not in _METADATA_ALLOWED:
            if not _unset(value):
                out.append(Violation(f"{path}.{key}", "only labels and annotations may be set"))
            continue
        if key == "annotations":
            for name in value or {}:
                if str(name).startswith(_PROFILE_ANNOTATION_PREFIXES):
                    out.append(
                        Violation(
                            f"{path}.annotations[{name}]",
                            "security profile annotations are not allowed",
                        )
                    )
    return out


def _pod_spec(
    spec: Mapping[str, Any], path: str, allowed_pull_secrets: Collection[str]
) -> list[Violation]:
    out: list[Violation] = []
    for key, value in spec.items():
        where = f"{path}.{key}"
        if key in _SPEC_FREE:
            continue
        if key == "containers":
            out += _containers(value or [], where)
        elif key == "securityContext":
            out += _pod_security_context(value or {}, where)
        elif key == "imagePullSecrets":
            out += _pull_secrets(value or [], where, allowed_pull_secrets)
        elif not _unset(value):
            out.append(Violation(where, _why_forbidden(key)))
    return out


def _why_forbidden(key: str) -> str:
    if key in ("hostPID", "hostIPC", "hostNetwork", "hostUsers"):
        return "host namespaces are not allowed"
    if key in ("volumes", "initContainers", "ephemeralContainers"):
        return f"{key} are not allowed (the listener pod runs in the controller's namespace)"
    if key in ("serviceAccountName", "serviceAccount", "automountServiceAccountToken"):
        return "the listener uses its own service account"
    return "not an allowed listener override"


def _containers(containers: Iterable[Mapping[str, Any]], path: str) -> list[Violation]:
    out: list[Violation] = []
    seen_listener = False
    for i, container in enumerate(containers):
        where = f"{path}[{i}]"
        if container.get("name") != c.LISTENER_CONTAINER_NAME or seen_listener:
            out.append(
                Violation(
                    where,
                    f"extra containers are not allowed; only the "
                    f"{c.LISTENER_CONTAINER_NAME!r} container may be customised",
                )
            )
            continue
        seen_listener = True
        for key, value in container.items():
            at = f"{where}.{key}"
            if key in _CONTAINER_FREE:
                continue
            if key == "env":
                out += _env(value or [], at)
            elif key == "securityContext":
                out += _container_security_context(value or {}, at)
            elif not _unset(value):
                out.append(Violation(at, "not an allowed listener container override"))
    return out


def _env(env: Iterable[Mapping[str, Any]], path: str) -> list[Violation]:
    out: list[Violation] = []
    for i, var in enumerate(env):
        for source in (var.get("valueFrom") or {}).keys() - _SAFE_VALUE_FROM:
            out.append(
                Violation(
                    f"{path}[{i}].valueFrom.{source}",
                    "env may not read Secrets or ConfigMaps of the controller's namespace",
                )
            )
    return out


def _pull_secrets(
    refs: Iterable[Mapping[str, Any]], path: str, allowed: Collection[str]
) -> list[Violation]:
    return [
        Violation(
            f"{path}[{i}].name",
            f"Secret {ref.get('name')!r} is in the controller's namespace, not the scale "
            "set's; only the controller's own listener pull secrets may be named",
        )
        for i, ref in enumerate(refs)
        if ref.get("name") not in allowed
    ]


# --- security contexts: only stricter than the restricted defaults -------------------------


def _must_equal(value: Any, want: Any, path: str) -> list[Violation]:
    if value is None or value == want:
        return []
    return [Violation(path, f"must be {str(want).lower()} (may not loosen the default)")]


def _positive_id(value: Any, path: str) -> list[Violation]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return []
    return [Violation(path, "must be a non-root id (greater than 0)")]


def _profile(value: Any, path: str) -> list[Violation]:
    kind = (value or {}).get("type")
    if kind is None or kind in _SAFE_PROFILE_TYPES:
        return []
    return [Violation(f"{path}.type", f"{kind!r} is not allowed (RuntimeDefault or Localhost)")]


def _pod_security_context(ctx: Mapping[str, Any], path: str) -> list[Violation]:
    out: list[Violation] = []
    for key, value in ctx.items():
        at = f"{path}.{key}"
        if key == "runAsNonRoot":
            out += _must_equal(value, True, at)
        elif key in ("runAsUser", "runAsGroup", "fsGroup"):
            out += _positive_id(value, at)
        elif key == "supplementalGroups":
            for i, gid in enumerate(value or []):
                out += _positive_id(gid, f"{at}[{i}]")
        elif key in ("seccompProfile", "appArmorProfile"):
            out += _profile(value, at)
        elif key in ("fsGroupChangePolicy", "supplementalGroupsPolicy"):
            continue
        elif not _unset(value):
            out.append(Violation(at, "not allowed (may not loosen the restricted default)"))
    return out


def _container_security_context(ctx: Mapping[str, Any], path: str) -> list[Violation]:
    out: list[Violation] = []
    for key, value in ctx.items():
        at = f"{path}.{key}"
        if key in ("privileged", "allowPrivilegeEscalation"):
            out += _must_equal(value, False, at)
        elif key in ("readOnlyRootFilesystem", "runAsNonRoot"):
            out += _must_equal(value, True, at)
        elif key in ("runAsUser", "runAsGroup"):
            out += _positive_id(value, at)
        elif key in ("seccompProfile", "appArmorProfile"):
            out += _profile(value, at)
        elif key == "procMount":
            if value not in (None, "Default"):
                out.append(Violation(at, "must be Default (may not loosen the default)"))
        elif key == "capabilities":
            out += _capabilities(value or {}, at)
        elif not _unset(value):
            out.append(Violation(at, "not allowed (may not loosen the restricted default)"))
    return out


def _capabilities(caps: Mapping[str, Any], path: str) -> list[Violation]:
    out: list[Violation] = []
    if caps.get("add"):
        out.append(Violation(f"{path}.add", "capabilities may not be added"))
    drop = caps.get("drop")
    if drop is not None and "ALL" not in drop:
        out.append(Violation(f"{path}.drop", "must include ALL"))
    for key in caps.keys() - {"add", "drop"}:
        out.append(Violation(f"{path}.{key}", "not allowed"))
    return out
