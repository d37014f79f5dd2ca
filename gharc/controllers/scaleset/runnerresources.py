"""Builders of the objects the EphemeralRunnerSet and EphemeralRunner reconcilers own.

Pure functions from parent objects (dicts as the API returns them) to the desired child
objects (spec §5.2, §9.6, §10.3, §11.1), so they are unit-tested without a cluster and the
reconcilers stay about decisions, not dictionary plumbing.

Also here: the comparison of runner templates, :func:`gharc.kube.objects.semantically_equal`
(behaviours B4). A runner's state (phase, job, registration) is read through
:class:`gharc.api.scaleset.views.EphemeralRunnerView`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.models import ProxyConfig
from gharc.api.scaleset.views import (
    ANNOTATION_ACTIONABLE_REVISION,
    EphemeralRunnerSetView,
)
from gharc.controllers.scaleset.labels import filter_and_merge_labels, merge_annotations
from gharc.kube import objects
from gharc.kube.handler import owner_reference
from gharc.kube.store import copy_object

JSON = dict[str, Any]

#: Secret keys of the JIT config Secret (spec §10.3); ``jitToken`` is the shared constant.
SECRET_KEY_RUNNER_NAME: Final = "runnerName"
SECRET_KEY_RUNNER_ID: Final = "runnerId"
SECRET_KEY_SCALE_SET_ID: Final = "scaleSetId"


# --- small accessors ---------------------------------------------------------------------


def phase_status(
    phase: str,
    reason: str | None = None,
    message: str | None = None,
    *,
    ready: bool = False,
    **more: Any,
) -> JSON:
    """The status patch that moves a runner to ``phase``. ``reason`` and ``message`` are
    always written (None clears them): a runner must not show the last phase's reason under
    its new one. ``more``: other status fields that move with the phase."""
    return {
        "status": {**more, "phase": phase, "ready": ready, "reason": reason, "message": message}
    }


def creation_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """Sort key: oldest first (RFC 3339 timestamps sort as strings), then by name."""
    m = objects.meta(obj)
    return (str(m.get("creationTimestamp") or ""), str(m.get("name") or ""))


# --- EphemeralRunnerSet children ---------------------------------------------------------


def proxy_config(runner_spec: Mapping[str, Any]) -> ProxyConfig | None:
    raw = runner_spec.get("proxy")
    return ProxyConfig.model_validate(raw) if raw else None


def proxy_secret_name(ers: Mapping[str, Any]) -> str:
    m = objects.meta(ers)
    return c.ephemeral_runner_set_proxy_secret_name(str(m["name"]), str(m["namespace"]))


def desired_runner_spec(ers: Mapping[str, Any]) -> JSON:
    """``spec`` of a new EphemeralRunner: the ERS template, plus the proxy Secret name."""
    runner_spec: JSON = copy_object(dict(EphemeralRunnerSetView(ers).runner_spec))
    if runner_spec.get("proxy"):
        runner_spec["proxySecretRef"] = proxy_secret_name(ers)
    return runner_spec


def new_ephemeral_runner(ers: Mapping[str, Any]) -> JSON:
    """The EphemeralRunner to create for ``ers`` (spec §9.6, §5.2).

    Labels are the ERS labels + component ``runner``; annotations the ERS annotations + the
    patch ID and actionable revision it was built for. ``spec.ephemeralRunnerMetadata`` is
    merged under (computed keys win). Both finalizers are set at creation so no runner can
    exist, even for a moment, without its GitHub registration being guarded.
    """
    m = objects.meta(ers)
    view = EphemeralRunnerSetView(ers)
    extra = view.spec.get("ephemeralRunnerMetadata") or {}
    labels = dict(m.get("labels") or {})
    labels[c.LABEL_COMPONENT] = c.COMPONENT_RUNNER
    annotations = dict(m.get("annotations") or {})
    annotations.pop(c.ANNOTATION_INTEGRITY_HASH, None)
    annotations[c.ANNOTATION_PATCH_ID] = str(view.patch_id)
    annotations[ANNOTATION_ACTIONABLE_REVISION] = str(view.actionable_revision)
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_EPHEMERAL_RUNNER,
        "metadata": {
            "generateName": c.ephemeral_runner_generate_name(str(m["name"])),
            "namespace": m["namespace"],
            "labels": merge_annotations(extra.get("labels"), labels),
            "annotations": merge_annotations(extra.get("annotations"), annotations),
            "finalizers": [c.FINALIZER_EPHEMERAL_RUNNER, c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION],
            "ownerReferences": [owner_reference(ers)],
        },
        "spec": desired_runner_spec(ers),
    }


def new_proxy_secret(ers: Mapping[str, Any], data: Mapping[str, str]) -> JSON:
    """The ERS proxy Secret (env var name -> value), labelled with the scale set only."""
    m = objects.meta(ers)
    view = EphemeralRunnerSetView(ers)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": proxy_secret_name(ers),
            "namespace": m["namespace"],
            "labels": {
                c.LABEL_SCALE_SET_NAME: view.scale_set_name,
                c.LABEL_SCALE_SET_NAMESPACE: view.scale_set_namespace,
            },
            "ownerReferences": [owner_reference(ers)],
        },
        "data": encode_data(data),
    }


# --- EphemeralRunner children ------------------------------------------------------------


#: What the EphemeralRunner reconciler reads its JIT config Secret with.
decode_data = objects.decode_secret_data


def encode_data(data: Mapping[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


def runner_container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for container in pod_spec.get("containers") or ():
        if container.get("name") == c.RUNNER_CONTAINER_NAME:
            return dict(container)
    return None


def work_folder(er: Mapping[str, Any]) -> str:
    """The runner container's ``workingDir`` if set (ARC's JIT ``workFolder``), else ``_work``."""
    container = runner_container(objects.spec_of(er).get("spec") or {}) or {}
    return str(container.get("workingDir") or "_work")


def has_container_hooks(er: Mapping[str, Any]) -> bool:
    """ARC ``HasContainerHookConfigured()``: kubernetes mode, job pods carry ``runner-pod``."""
    container = runner_container(objects.spec_of(er).get("spec") or {}) or {}
    return any(e.get("name") == c.ENV_RUNNER_CONTAINER_HOOKS for e in container.get("env") or ())


def new_jit_secret(
    er: Mapping[str, Any],
    *,
    encoded_jit_config: str,
    runner_name: str,
    runner_id: int,
    scale_set_id: int,
    exclude_label_prefixes: Iterable[str] = (),
) -> JSON:
    """The JIT config Secret of a runner (spec §10.3); metadata only from the user's
    ``ephemeralRunnerConfigSecretMetadata`` (labels filtered)."""
    m = objects.meta(er)
    extra = objects.spec_of(er).get("ephemeralRunnerConfigSecretMetadata") or {}
    metadata: JSON = {
        "name": c.runner_jit_secret_name(str(m["name"])),
        "namespace": m["namespace"],
        "ownerReferences": [owner_reference(er)],
    }
    labels = filter_and_merge_labels(extra.get("labels"), None, exclude_label_prefixes)
    if labels:
        metadata["labels"] = labels
    if extra.get("annotations"):
        metadata["annotations"] = dict(extra["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": encode_data(
            {
                c.SECRET_KEY_JIT_TOKEN: encoded_jit_config,
                SECRET_KEY_RUNNER_NAME: runner_name,
                SECRET_KEY_RUNNER_ID: str(runner_id),
                SECRET_KEY_SCALE_SET_ID: str(scale_set_id),
            }
        ),
    }


def _secret_env(name: str, secret: str, key: str) -> JSON:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def runner_env(er: Mapping[str, Any], secret_name: str, user_agent: str) -> list[JSON]:
    """Env appended to the ``runner`` container (spec §11.1)."""
    env = [
        _secret_env(c.ENV_RUNNER_JIT_CONFIG, secret_name, c.SECRET_KEY_JIT_TOKEN),
        {"name": c.ENV_RUNNER_EXTRA_USER_AGENT, "value": user_agent},
        {"name": c.ENV_RUNNER_DEPRECATED_EXIT_CODE, "value": "1"},
    ]
    spec = objects.spec_of(er)
    proxy_secret = spec.get("proxySecretRef")
    proxy = proxy_config(spec)
    if proxy_secret and proxy is not None:
        if proxy.http:
            env.append(_secret_env(c.ENV_HTTP_PROXY, proxy_secret, c.ENV_HTTP_PROXY))
        if proxy.https:
            env.append(_secret_env(c.ENV_HTTPS_PROXY, proxy_secret, c.ENV_HTTPS_PROXY))
        if proxy.no_proxy:
            env.append(_secret_env(c.ENV_NO_PROXY, proxy_secret, c.ENV_NO_PROXY))
    return env


def new_runner_pod(er: Mapping[str, Any], secret: Mapping[str, Any], user_agent: str) -> JSON:
    """The runner Pod of ``er`` (spec §11.1): the template verbatim, plus the runner env.

    ``pod-template-hash`` is a hash of the JIT secret's data, as ARC's effectively is: a
    new registration means a new pod.
    """
    m = objects.meta(er)
    template = objects.spec_of(er)
    tmeta = objects.meta(template)
    pod_spec: JSON = copy_object(dict(objects.spec_of(template)))
    secret_name = str(objects.meta(secret).get("name") or m["name"])
    for container in pod_spec.get("containers") or ():
        if container.get("name") == c.RUNNER_CONTAINER_NAME:
            container["env"] = list(container.get("env") or ()) + runner_env(
                er, secret_name, user_agent
            )
    labels = dict(m.get("labels") or {})
    labels.update(tmeta.get("labels") or {})
    labels[c.LABEL_EPHEMERAL_RUNNER] = c.LABEL_VALUE_EPHEMERAL_RUNNER
    digest = json.dumps(secret.get("data") or {}, sort_keys=True)
    labels[c.LABEL_POD_TEMPLATE_HASH] = c.fnv_hash_string(digest)
    annotations = dict(m.get("annotations") or {})
    annotations.update(tmeta.get("annotations") or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": c.runner_pod_name(str(m["name"])),
            "namespace": m["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(er)],
        },
        "spec": pod_spec,
    }
