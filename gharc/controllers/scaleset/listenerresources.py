"""Builders for the AutoscalingListener and the objects it owns (spec §8.1, §8.3-8.6).

Pure functions from dicts to dicts: no I/O, so every rule here is unit-tested without a
cluster, and both reconcilers (ARS builds the listener, the listener reconciler builds its
ServiceAccount, Role, RoleBinding, Secrets and Pod) share one definition of "desired".

Also home of the two comparison helpers the reconcilers use, because "is the live object
what we want?" must be answered the same way everywhere:

- :func:`semantically_equal` (from :mod:`gharc.kube.objects`, the one drift check the
  runner reconcilers use too) treats absent, ``None``, ``[]`` and ``{}`` as the same thing.
  The API server drops empty lists and maps from core objects (``omitempty``) and tools
  round-trip manifests differently; comparing raw dicts would see drift that is not there
  and rebuild objects on every reconcile (behaviours B4).
- :func:`merge_patch_for` computes an RFC 7386 patch that turns ``live`` into ``desired``,
  including ``null`` for keys that must disappear (a plain merge patch of the desired dict
  would leave removed keys in place).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import AutoscalingListenerView, AutoscalingRunnerSetView
from gharc.controllers.scaleset import listenerpolicy as policy
from gharc.controllers.scaleset.labels import filter_and_merge_labels
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.github.config import InvalidConfigUrl, parse_config_url
from gharc.github.proxy import ProxySettings
from gharc.kube import objects
from gharc.kube.handler import owner_reference
from gharc.kube.logging import LOG_LEVELS
from gharc.kube.serving import host_port, serving_address
from gharc.listener import metric_limits as ml

JSON = dict[str, Any]

RBAC_API_GROUP = "rbac.authorization.k8s.io"
LISTENER_CONFIG_VOLUME = "listener-config"
LISTENER_CONFIG_DIR = "/etc/gha-listener"
LISTENER_TERMINATION_GRACE_SECONDS = 60
#: Writable scratch space: the listener's root filesystem is read-only.
LISTENER_TMP_VOLUME = "tmp"
LISTENER_TMP_DIR = "/tmp"


# --- comparison helpers ------------------------------------------------------------------


def merge_patch_for(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> JSON:
    """The RFC 7386 merge patch that makes ``live`` equal ``desired`` (lists replaced whole)."""
    live = live or {}
    patch: JSON = {}
    for key in live:
        if key not in desired:
            patch[key] = None
    for key, want in desired.items():
        have = live.get(key)
        if isinstance(want, Mapping) and isinstance(have, Mapping):
            sub = merge_patch_for(have, want)
            if sub:
                patch[key] = sub
        elif want != have or key not in live:
            patch[key] = copy.deepcopy(want)
    return patch


def contains_all(live: Mapping[str, str] | None, desired: Mapping[str, str] | None) -> bool:
    """True when every key of ``desired`` is in ``live`` with the same value.

    Label/annotation maps are compared this way: other controllers and users may add keys
    (kubectl, Argo CD), and those must not look like drift.
    """
    have = live or {}
    return all(have.get(k) == v for k, v in (desired or {}).items())


# --- labels ------------------------------------------------------------------------------


def url_labels(config_url: str) -> dict[str, str]:
    """Enterprise/organization/repository labels of a config URL ({} if it does not parse)."""
    try:
        cfg = parse_config_url(config_url)
    except InvalidConfigUrl:
        return {}
    return c.github_url_labels(cfg.enterprise or "", cfg.organization or "", cfg.repository or "")


def _resource_meta(spec: Mapping[str, Any], key: str) -> tuple[dict[str, str], dict[str, str]]:
    meta = spec.get(key) or {}
    return dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})


def listener_labels(ars: Mapping[str, Any], options: ScaleSetOptions) -> dict[str, str]:
    """Labels of the AutoscalingListener (§5.2): computed keys win over user metadata."""
    meta, spec = objects.meta(ars), objects.spec_of(ars)
    ars_labels = dict(meta.get("labels") or {})
    computed = filter_and_merge_labels(
        ars_labels,
        {
            c.LABEL_SCALE_SET_NAMESPACE: str(meta.get("namespace") or ""),
            c.LABEL_SCALE_SET_NAME: str(meta.get("name") or ""),
            c.LABEL_PART_OF: c.LABEL_VALUE_PART_OF,
            c.LABEL_COMPONENT: c.COMPONENT_LISTENER,
            **(
                {c.LABEL_VERSION: ars_labels[c.LABEL_VERSION]}
                if c.LABEL_VERSION in ars_labels
                else {}
            ),
            **url_labels(AutoscalingRunnerSetView(ars).github_config_url),
        },
        options.exclude_label_propagation_prefixes,
    )
    user_labels, _ = _resource_meta(spec, "autoscalingListener")
    return filter_and_merge_labels(user_labels, computed, ()) or {}


# --- the AutoscalingListener (built by the ARS reconciler) -------------------------------


def capped_max_runners(ars: Mapping[str, Any], options: ScaleSetOptions) -> int:
    """The set's ``maxRunners`` within ``--max-runners-per-scale-set``: the listener never
    asks for more, whatever minRunners, a scheduled override or the job queue say."""
    asked = c.max_runners_or_unlimited(objects.spec_of(ars).get("maxRunners"))
    cap = options.max_runners_per_scale_set
    return min(asked, cap) if cap > 0 else asked


def runner_cap_exceeded(ars: Mapping[str, Any], options: ScaleSetOptions) -> str | None:
    """Why the set's runners are capped below what it asks, or None."""
    cap = options.max_runners_per_scale_set
    if cap <= 0:
        return None
    view = AutoscalingRunnerSetView(ars)
    asked = c.max_runners_or_unlimited(objects.spec_of(ars).get("maxRunners"))
    if asked <= cap and view.min_runners <= cap:
        return None
    what = f"maxRunners {asked}" if asked != c.MAX_RUNNERS_UNLIMITED else "no maxRunners"
    if view.min_runners > cap:
        what += f" and minRunners {view.min_runners}"
    return (
        f"{what} exceed the controller's limit of {cap} runners per scale set "
        f"(--max-runners-per-scale-set): at most {cap} runners are created"
    )


def desired_listener(ars: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """ARC ``newAutoscalingListener``: the listener of an ARS, in the controller namespace.

    No owner reference: owners must be in the same namespace. The ARS reconciler deletes
    the listener itself, and the listener reconciler deletes itself when its ARS is gone.
    Raises ``ValueError`` when the ARS has no valid ``runner-scale-set-id`` yet.
    """
    meta, spec = objects.meta(ars), objects.spec_of(ars)
    view = AutoscalingRunnerSetView(ars)
    scale_set_id = view.scale_set_id
    if scale_set_id is None:
        raise ValueError(f"{c.ANNOTATION_RUNNER_SCALE_SET_ID} is not a scale set id yet")
    listener_spec: JSON = {
        "githubConfigUrl": spec.get("githubConfigUrl"),
        "githubConfigSecret": spec.get("githubConfigSecret"),
        "vaultConfig": spec.get("vaultConfig"),
        "runnerScaleSetId": scale_set_id,
        "autoscalingRunnerSetNamespace": meta.get("namespace"),
        "autoscalingRunnerSetName": meta.get("name"),
        "ephemeralRunnerSetName": c.ephemeral_runner_set_name(str(meta.get("name"))),
        "minRunners": min(view.min_runners, capped_max_runners(ars, options)),
        "maxRunners": capped_max_runners(ars, options),
        "image": options.listener_image,
        "imagePullSecrets": [{"name": n} for n in options.listener_image_pull_secrets],
        "proxy": spec.get("proxy"),
        "githubServerTLS": spec.get("githubServerTLS"),
        "metrics": spec.get("listenerMetrics"),
        "scheduledOverrides": spec.get("scheduledOverrides"),
        "burst": spec.get("burst"),
        "template": spec.get("listenerTemplate"),
        "serviceAccountMetadata": spec.get("listenerServiceAccountMetadata"),
        "roleMetadata": spec.get("listenerRoleMetadata"),
        "roleBindingMetadata": spec.get("listenerRoleBindingMetadata"),
        "configSecretMetadata": spec.get("listenerConfigSecretMetadata"),
    }
    _, user_annotations = _resource_meta(spec, "autoscalingListener")
    out_meta: JSON = {
        "name": c.listener_name_for(dict(ars)),
        "namespace": options.controller_namespace,
        "labels": listener_labels(ars, options),
    }
    if user_annotations:
        out_meta["annotations"] = user_annotations
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_AUTOSCALING_LISTENER,
        "metadata": out_meta,
        # NB: only unset top-level fields are dropped; the template keeps explicit empties
        # (an empty nodeSelector clears the linux default, §8.6).
        "spec": {k: v for k, v in listener_spec.items() if v is not None and v != []},
    }


def listener_needs_rebuild(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when the live listener differs from ``desired`` in spec, labels or annotations."""
    if not objects.semantically_equal(objects.spec_of(live), objects.spec_of(desired)):
        return True
    lm, dm = objects.meta(live), objects.meta(desired)
    return not (
        contains_all(lm.get("labels"), dm.get("labels"))
        and contains_all(lm.get("annotations"), dm.get("annotations"))
    )


# --- objects owned by the listener -------------------------------------------------------


def _listener_ref(listener: Mapping[str, Any]) -> JSON:
    return owner_reference(listener)


def _scale_set_labels(listener: Mapping[str, Any]) -> dict[str, str]:
    view = AutoscalingListenerView(listener)
    return {c.LABEL_SCALE_SET_NAMESPACE: view.ars_namespace, c.LABEL_SCALE_SET_NAME: view.ars_name}


def rbac_labels(listener: Mapping[str, Any]) -> dict[str, str]:
    """Labels of the Role/RoleBinding: how their watch events find the listener (§8)."""
    meta = objects.meta(listener)
    return {
        **dict(meta.get("labels") or {}),
        **_scale_set_labels(listener),
        c.LABEL_LISTENER_NAMESPACE: str(meta.get("namespace") or ""),
        c.LABEL_LISTENER_NAME: str(meta.get("name") or ""),
    }


def _with_user_meta(
    listener: Mapping[str, Any], key: str, computed: dict[str, str], options: ScaleSetOptions
) -> tuple[dict[str, str], dict[str, str]]:
    user_labels, user_annotations = _resource_meta(objects.spec_of(listener), key)
    labels = filter_and_merge_labels(
        user_labels, computed, options.exclude_label_propagation_prefixes
    )
    return labels or {}, user_annotations


def listener_service_account(listener: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """The listener's ServiceAccount (controller namespace, owned by the listener)."""
    meta = objects.meta(listener)
    labels, annotations = _with_user_meta(
        listener,
        "serviceAccountMetadata",
        {**dict(meta.get("labels") or {}), **_scale_set_labels(listener)},
        options,
    )
    out_meta: JSON = {
        "name": c.listener_service_account_name(str(meta["name"])),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [_listener_ref(listener)],
    }
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": out_meta}


def _rbac_object(
    listener: Mapping[str, Any], options: ScaleSetOptions, kind: str, name: str, meta_key: str
) -> JSON:
    """A Role or RoleBinding in the ARS namespace, with the user's ``meta_key`` metadata."""
    labels, annotations = _with_user_meta(listener, meta_key, rbac_labels(listener), options)
    out_meta: JSON = {
        "name": name,
        "namespace": objects.spec_of(listener).get("autoscalingRunnerSetNamespace"),
        "labels": labels,
    }
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": f"{RBAC_API_GROUP}/v1", "kind": kind, "metadata": out_meta}


def listener_role(listener: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """Role in the ARS namespace: patch its own ERS, patch runners and their status only."""
    name = c.listener_role_name(str(objects.meta(listener)["name"]))
    return {
        **_rbac_object(listener, options, "Role", name, "roleMetadata"),
        "rules": c.listener_role_rules([AutoscalingListenerView(listener).ers_name]),
    }


def listener_role_binding(listener: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """RoleBinding of the listener's Role to its ServiceAccount (across namespaces)."""
    meta = objects.meta(listener)
    name = str(meta["name"])
    binding = c.listener_role_binding_name(name)
    return {
        **_rbac_object(listener, options, "RoleBinding", binding, "roleBindingMetadata"),
        "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "Role", "name": c.listener_role_name(name)},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "namespace": meta.get("namespace"),
                "name": c.listener_service_account_name(name),
            }
        ],
    }


_LISTENER_DEFAULTS = {
    "metrics_max_buckets": ml.MAX_HISTOGRAM_BUCKETS,
    "metrics_max_label_values": ml.MAX_LABEL_VALUES,
    "metrics_max_series": ml.MAX_SERIES,
}


def metrics_enabled(options: ScaleSetOptions) -> bool:
    """ARC: ``--listener-metrics-addr=0`` (or empty) disables listener metrics."""
    return serving_address(options.listener_metrics_addr) is not None


def metrics_port(addr: str) -> int | None:
    """The port of a Go-style ``[host]:port`` address (the listener reads it the same way),
    or None when it has none the listener could serve on."""
    try:
        return host_port(addr)[1]
    except ValueError:
        return None


def listener_config(
    listener: Mapping[str, Any],
    secret_data: Mapping[str, str],
    options: ScaleSetOptions,
    *,
    server_root_ca: str | None = None,
    vault_proxy: ProxySettings | None = None,
) -> JSON:
    """The listener's ``config.json`` with ARC's keys (§8.4).

    With ``vaultConfig`` the config carries no credentials but where to read them (the
    listener reads the vault itself); ``vault_proxy`` is ``vaultConfig.proxy`` with its
    credentials, written as Go's ``httpproxy.Config`` as ARC's listener decodes it.

    ``secret_data`` is the decoded githubConfigSecret; only its credential keys are copied.
    ``runner_scale_set_name`` is the ARS name, as in ARC (not the GitHub scale set name).
    """
    view = AutoscalingListenerView(listener)
    spec = view.spec
    config: JSON = {
        "configure_url": view.github_config_url,
        "ephemeral_runner_set_namespace": view.ars_namespace,
        "ephemeral_runner_set_name": view.ers_name,
        "max_runners": view.max_runners,
        "min_runners": view.min_runners,
        "runner_scale_set_id": view.scale_set_id,
        "runner_scale_set_name": view.ars_name,
        "log_level": options.log_level
        if options.log_level in LOG_LEVELS
        else c.DEFAULT_LISTENER_LOG_LEVEL,
        "log_format": options.log_format
        if options.log_format in ("text", "json")
        else c.DEFAULT_LISTENER_LOG_FORMAT,
    }
    vault = spec.get("vaultConfig") or {}
    if vault.get("type"):
        config["vault_type"] = vault["type"]
        config["vault_lookup_key"] = spec.get("githubConfigSecret") or ""
        azure = vault.get("azureKeyVault") or {}
        if azure:
            config["azure_key_vault"] = {
                "tenant_id": azure.get("tenantId", ""),
                "client_id": azure.get("clientId", ""),
                "url": azure.get("url", ""),
                "certificate_path": azure.get("certificatePath", ""),
            }
            if vault_proxy is not None:
                config["azure_key_vault"]["proxy"] = {
                    "HTTPProxy": vault_proxy.http or "",
                    "HTTPSProxy": vault_proxy.https or "",
                    "NoProxy": ",".join(vault_proxy.no_proxy),
                }
    elif secret_data.get("github_token", "").strip():
        config["github_token"] = secret_data["github_token"]
    else:
        config["github_app_id"] = secret_data.get("github_app_id", "")
        installation = str(secret_data.get("github_app_installation_id", "0")).strip() or "0"
        config["github_app_installation_id"] = int(installation)
        config["github_app_private_key"] = secret_data.get("github_app_private_key", "")
    if server_root_ca:
        config["server_root_ca"] = server_root_ca
    if metrics_enabled(options):
        config["metrics_addr"] = options.listener_metrics_addr
        config["metrics_endpoint"] = options.listener_metrics_endpoint
    if spec.get("metrics"):
        config["metrics"] = spec["metrics"]
    # Only when not the listener's own default: an unchanged config.json (and fingerprint)
    # for everyone who keeps the defaults.
    for key, value in (
        ("metrics_max_buckets", options.listener_metrics_max_buckets),
        ("metrics_max_label_values", options.listener_metrics_max_label_values),
        ("metrics_max_series", options.listener_metrics_max_series),
    ):
        if value != _LISTENER_DEFAULTS[key]:
            config[key] = value
    if spec.get("scheduledOverrides"):
        config["scheduled_overrides"] = list(spec["scheduledOverrides"])
    burst = spec.get("burst") or {}
    if burst.get("runners"):
        config["burst_runners"] = int(burst["runners"])
        config["burst_decay_seconds"] = float(burst.get("decaySeconds") or 300)
    return config


def listener_config_secret(
    listener: Mapping[str, Any], config: Mapping[str, Any], options: ScaleSetOptions
) -> JSON:
    """Secret ``<listener>-config`` with key ``config.json`` (owned by the listener)."""
    meta = objects.meta(listener)
    labels, annotations = _with_user_meta(listener, "configSecretMetadata", {}, options)
    out_meta: JSON = {
        "name": c.listener_config_secret_name(str(meta["name"])),
        "namespace": meta.get("namespace"),
        "ownerReferences": [_listener_ref(listener)],
    }
    if labels:
        out_meta["labels"] = labels
    if annotations:
        out_meta["annotations"] = annotations
    payload = json.dumps(dict(config), sort_keys=True, indent=2).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": out_meta,
        "data": {c.SECRET_KEY_LISTENER_CONFIG: base64.b64encode(payload).decode()},
    }


def decoded_secret_data(secret: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's data, decoded leniently: it is only compared, desired against live."""
    return objects.decode_secret_data(secret, errors="replace")


def listener_proxy_secret(listener: Mapping[str, Any], data: Mapping[str, str]) -> JSON:
    """Secret ``<listener>-proxy`` with ``http_proxy``/``https_proxy``/``no_proxy``."""
    meta = objects.meta(listener)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": c.listener_proxy_secret_name(str(meta["name"])),
            "namespace": meta.get("namespace"),
            "labels": _scale_set_labels(listener),
            "ownerReferences": [_listener_ref(listener)],
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def _proxy_env(listener: Mapping[str, Any]) -> list[JSON]:
    proxy = objects.spec_of(listener).get("proxy") or {}
    if not proxy:
        return []
    secret = c.listener_proxy_secret_name(str(objects.meta(listener)["name"]))
    keys = []
    if proxy.get("http"):
        keys.append(c.ENV_HTTP_PROXY)
    if proxy.get("https"):
        keys.append(c.ENV_HTTPS_PROXY)
    if proxy.get("noProxy"):
        keys.append(c.ENV_NO_PROXY)
    return [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}} for k in keys]


def listener_template_violations(
    listener: Mapping[str, Any], options: ScaleSetOptions
) -> list[policy.Violation]:
    """What the listener's ``spec.template`` may not change ([] when unrestricted)."""
    if options.allow_unrestricted_listener_template:
        return []
    return policy.template_violations(
        objects.spec_of(listener).get("template"),
        allowed_pull_secrets=options.listener_image_pull_secrets,
        root="spec.template",
    )


def listener_pod(listener: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """The listener Pod (§8.5), with ``spec.template`` merged in (§8.6).

    ``restartPolicy: Never``: the listener reconciler paces restarts itself (behaviours B1).
    The pod meets the Pod Security ``restricted`` profile: it runs in the controller's
    namespace, so a template may only make it stricter (:mod:`listenerpolicy`) unless
    ``allow_unrestricted_listener_template``. Raises
    :class:`~gharc.controllers.scaleset.listenerpolicy.ListenerTemplateForbidden` rather than
    build a pod from a forbidden template (the reconcilers refuse it before they get here).
    """
    meta, spec = objects.meta(listener), objects.spec_of(listener)
    name = str(meta["name"])
    container: JSON = {
        "name": c.LISTENER_CONTAINER_NAME,
        "image": spec.get("image") or options.listener_image,
        "command": list(options.listener_command),
        "env": [
            {"name": c.ENV_LISTENER_CONFIG_PATH, "value": c.LISTENER_CONFIG_PATH},
            *_proxy_env(listener),
        ],
        "volumeMounts": [
            {"name": LISTENER_CONFIG_VOLUME, "mountPath": LISTENER_CONFIG_DIR, "readOnly": True},
            {"name": LISTENER_TMP_VOLUME, "mountPath": LISTENER_TMP_DIR},
        ],
        "securityContext": copy.deepcopy(dict(policy.RESTRICTED_CONTAINER_SECURITY_CONTEXT)),
    }
    port = metrics_port(options.listener_metrics_addr) if metrics_enabled(options) else None
    if port:
        container["ports"] = [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    pod_spec: JSON = {
        "serviceAccountName": c.listener_service_account_name(name),
        "nodeSelector": {c.LABEL_KUBERNETES_OS: c.LABEL_VALUE_KUBERNETES_OS_LINUX},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": LISTENER_TERMINATION_GRACE_SECONDS,
        "securityContext": copy.deepcopy(dict(policy.RESTRICTED_POD_SECURITY_CONTEXT)),
        "containers": [container],
        "volumes": [
            {
                "name": LISTENER_CONFIG_VOLUME,
                "secret": {"secretName": c.listener_config_secret_name(name)},
            },
            {"name": LISTENER_TMP_VOLUME, "emptyDir": {}},
        ],
    }
    if spec.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = copy.deepcopy(spec["imagePullSecrets"])
    pod: JSON = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": c.listener_pod_name(name),
            "namespace": meta.get("namespace"),
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [_listener_ref(listener)],
        },
        "spec": pod_spec,
    }
    template = spec.get("template")
    if not template:
        return pod
    if options.allow_unrestricted_listener_template:
        merge_listener_pod_template(pod, template)
        _keep_default_security_contexts(pod, template)
        return pod
    violations = listener_template_violations(listener, options)
    if violations:
        raise policy.ListenerTemplateForbidden(violations)
    return merge_restricted_listener_template(pod, template)


def _keep_default_security_contexts(pod: JSON, template: Mapping[str, Any]) -> None:
    """ARC's merge drops a security context the template does not set; keep ours then."""
    tspec = objects.spec_of(template)
    spec = pod["spec"]
    if tspec.get("securityContext") is None:
        spec["securityContext"] = copy.deepcopy(dict(policy.RESTRICTED_POD_SECURITY_CONTEXT))
    tlistener: Mapping[str, Any] = next(
        (x for x in tspec.get("containers") or [] if x.get("name") == c.LISTENER_CONTAINER_NAME),
        {},
    )
    if tlistener.get("securityContext") is None and spec.get("containers"):
        spec["containers"][0]["securityContext"] = copy.deepcopy(
            dict(policy.RESTRICTED_CONTAINER_SECURITY_CONTEXT)
        )


def merge_restricted_listener_template(pod: JSON, template: Mapping[str, Any]) -> JSON:
    """Apply an allowed template (see :mod:`listenerpolicy`) to ``pod``, in place.

    Only the allowed fields are read, so anything else is ignored even if unchecked.
    Unlike ARC's merge, fields the template leaves out keep gharc's value (no reset of
    ``terminationGracePeriodSeconds``), and a security context is laid over the restricted
    default instead of replacing it: a template that sets ``runAsUser`` keeps
    ``runAsNonRoot`` and the seccomp profile.
    """
    _merge_template_metadata(pod, template)
    tspec = objects.spec_of(template)
    spec = pod.setdefault("spec", {})
    listener = spec["containers"][0]
    for tc in tspec.get("containers") or []:
        if tc.get("name") != c.LISTENER_CONTAINER_NAME:
            continue
        if tc.get("env"):
            listener["env"] = [*(listener.get("env") or []), *copy.deepcopy(tc["env"])]
        for key in ("resources", "imagePullPolicy"):
            if tc.get(key) is not None:
                listener[key] = copy.deepcopy(tc[key])
        _overlay(listener, "securityContext", tc.get("securityContext"))
    if tspec.get("nodeSelector") is not None:
        _set_or_drop(spec, "nodeSelector", tspec["nodeSelector"] or None)
    for key in ("tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"):
        if tspec.get(key) is not None:
            spec[key] = copy.deepcopy(tspec[key])
    if tspec.get("imagePullSecrets") is not None:
        _set_or_drop(spec, "imagePullSecrets", tspec["imagePullSecrets"] or None)
    _overlay(spec, "securityContext", tspec.get("securityContext"))
    return pod


def _overlay(target: JSON, key: str, extra: Mapping[str, Any] | None) -> None:
    """``target[key]`` updated key by key with ``extra`` (the policy checked ``extra``)."""
    if extra:
        target[key] = {**(target.get(key) or {}), **copy.deepcopy(dict(extra))}


# --- listenerTemplate merge (§8.6) -------------------------------------------------------

#: Container fields APPENDED from the template's ``listener`` container.
_CONTAINER_APPEND = ("env", "args", "ports", "envFrom", "volumeMounts", "volumeDevices")
#: Container fields REPLACED by the template's value even when it is empty (ARC).
_CONTAINER_REPLACE = (
    "imagePullPolicy",
    "workingDir",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "securityContext",
    "resizePolicy",
    "restartPolicy",
    "stdin",
    "stdinOnce",
    "tty",
)
#: Pod fields overwritten with the template's value unconditionally (even when absent).
_POD_OVERWRITE = (
    "initContainers",
    "ephemeralContainers",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
)


def _set_or_drop(target: JSON, key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = copy.deepcopy(value)


def _merge_container(base: JSON, tmpl: Mapping[str, Any]) -> None:
    for key in ("image", "command"):
        if tmpl.get(key):
            base[key] = copy.deepcopy(tmpl[key])
    for key in _CONTAINER_APPEND:
        if tmpl.get(key):
            base[key] = [*(base.get(key) or []), *copy.deepcopy(tmpl[key])]
    for key in _CONTAINER_REPLACE:
        _set_or_drop(base, key, tmpl.get(key))


def _merge_template_metadata(pod: JSON, template: Mapping[str, Any]) -> None:
    """Template labels/annotations are added where the key is absent (ours win)."""
    tmeta = objects.meta(template)
    meta = pod.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        extra = tmeta.get(key) or {}
        if extra:
            merged = dict(meta.get(key) or {})
            for k, v in extra.items():
                merged.setdefault(k, v)
            meta[key] = merged


def merge_listener_pod_template(pod: JSON, template: Mapping[str, Any]) -> JSON:
    """ARC ``mergeListenerPodWithTemplate``, in place; returns ``pod``.

    Faithful to ARC, including its sharp edge: any template overwrites the listed pod
    fields, so a template without ``terminationGracePeriodSeconds`` removes the 60 s default.
    Service account fields of the template are ignored (the listener needs its own).
    Used only under ``--allow-unrestricted-listener-template``.
    """
    _merge_template_metadata(pod, template)
    tspec = objects.spec_of(template)
    spec = pod.setdefault("spec", {})
    containers: list[JSON] = spec.setdefault("containers", [])
    for tc in tspec.get("containers") or []:
        if tc.get("name") == c.LISTENER_CONTAINER_NAME and containers:
            _merge_container(containers[0], tc)
        else:
            containers.append(copy.deepcopy(tc))
    if tspec.get("restartPolicy"):
        spec["restartPolicy"] = tspec["restartPolicy"]
    if tspec.get("imagePullSecrets") is not None:
        spec["imagePullSecrets"] = copy.deepcopy(tspec["imagePullSecrets"])
    if tspec.get("nodeSelector") is not None:
        _set_or_drop(spec, "nodeSelector", tspec["nodeSelector"] or None)
    if tspec.get("volumes"):
        spec["volumes"] = [*(spec.get("volumes") or []), *copy.deepcopy(tspec["volumes"])]
    for key in _POD_OVERWRITE:
        _set_or_drop(spec, key, tspec.get(key))
    return pod
