"""Builders of the objects the legacy controllers create: runner pods (legacy.md 4.4), the
RunnerSet StatefulSet template, and the registration-token injection of RunnerSet pods.

Env names, order and volume layout follow ARC's ``newRunnerPodWithContainerMode`` because
the runner image's ``startup.sh`` reads them: a pod that differs only in env order still
works, but dashboards and debugging guides written for ARC assume this layout.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from gharc.api.legacy import constants as c
from gharc.api.legacy.views import RunnerConfigView
from gharc.api.scaleset.constants import fnv_hash_string
from gharc.controllers.legacy.options import LegacyOptions
from gharc.kube import objects

JSON = dict[str, Any]

DEFAULT_WORK_DIR = "/runner/_work"
DOCKER_HOST = "unix:///run/docker.sock"

#: Pod-level RunnerPodSpec fields that override the pod's defaults when set.
_POD_OVERRIDES = (
    "nodeSelector",
    "serviceAccountName",
    "automountServiceAccountToken",
    "securityContext",
    "imagePullSecrets",
    "affinity",
    "tolerations",
    "priorityClassName",
    "terminationGracePeriodSeconds",
    "ephemeralContainers",
    "hostAliases",
    "topologySpreadConstraints",
    "runtimeClassName",
    "dnsPolicy",
    "dnsConfig",
    "enableServiceLinks",
)

_DOCKER_PRE_STOP = (
    'timeout "${RUNNER_GRACEFUL_STOP_TIMEOUT:-15}" /bin/sh -c '
    "\"echo 'Prestop hook started'; while [ -f /runner/.runner ]; do sleep 1; done; "
    "echo 'Waiting for dockerd to start'; while ! pgrep -x dockerd; do sleep 1; done; "
    "echo 'Prestop hook stopped'\" >/proc/1/fd/1 2>&1"
)


def template_hash(obj: Any) -> str:
    """A stable short hash of a template (ARC uses FNV-32a over a spew dump; only equality
    matters, so FNV-32a over canonical JSON, encoded the same way, will do)."""
    return fnv_hash_string(json.dumps(obj, sort_keys=True, separators=(",", ":")))


def _env(name: str, value: str) -> JSON:
    return {"name": name, "value": value}


def _has_env(container: Mapping[str, Any], name: str) -> bool:
    return any(e.get("name") == name for e in container.get("env") or ())


def _find(containers: list[JSON], name: str) -> JSON | None:
    return next((ctr for ctr in containers if ctr.get("name") == name), None)


def _is_zero_quantity(value: Any) -> bool:
    return value is not None and str(value).strip() in ("0", "0M", "0Mi", "0G", "0Gi", "0k", "0Ki")


def docker_group_gid(runner_image: str, default: str) -> str:
    if "22.04" in runner_image or "24.04" in runner_image:
        return "121"
    if "20.04" in runner_image:
        return "1001"
    return default


class PodBuildError(ValueError):
    """The runner spec asks for a pod that cannot work (e.g. a user-defined ``work`` volume
    in kubernetes mode); reported on the object instead of creating a broken pod."""


def runner_pod_template(
    template: Mapping[str, Any], config: Mapping[str, Any], options: LegacyOptions
) -> JSON:
    """ARC ``newRunnerPodWithContainerMode``: the runner (and docker) containers, env and
    volumes added to a pod template, from a ``RunnerConfig``."""
    tmpl: JSON = copy.deepcopy(dict(template))
    meta = tmpl.setdefault("metadata", {})
    spec = tmpl.setdefault("spec", {})
    lbls = meta.setdefault("labels", {})
    lbls[c.LABEL_RUNNER] = ""
    lbls[c.LABEL_INJECT_REGISTRATION_TOKEN] = "true"

    runner_config = RunnerConfigView(config)
    kube_mode = runner_config.kubernetes_mode
    dind = runner_config.dockerd_within_runner_container
    docker_enabled = runner_config.docker_enabled
    sidecar = docker_enabled and not dind
    ephemeral = runner_config.ephemeral
    work_dir = str(config.get("workDir") or DEFAULT_WORK_DIR)

    containers: list[JSON] = list(spec.get("containers") or [])
    runner = _find(containers, c.CONTAINER_RUNNER)
    if runner is None:
        runner = {"name": c.CONTAINER_RUNNER}
        containers.insert(0, runner)
    docker = _find(containers, c.CONTAINER_DOCKER)
    if kube_mode and docker is not None:
        containers.remove(docker)
        docker = None
    if sidecar and docker is None:
        docker = {"name": c.CONTAINER_DOCKER}
        containers.append(docker)

    image = str(config.get("image") or runner.get("image") or options.runner_image)
    runner["image"] = image
    runner.setdefault("imagePullPolicy", "Always")

    env: list[JSON] = list(runner.get("env") or [])
    env += [
        _env("RUNNER_ORG", str(config.get("organization") or "")),
        _env("RUNNER_REPO", str(config.get("repository") or "")),
        _env("RUNNER_ENTERPRISE", str(config.get("enterprise") or "")),
        _env("RUNNER_LABELS", ",".join(config.get("labels") or [])),
        _env("RUNNER_GROUP", str(config.get("group") or "")),
        _env("DOCKER_ENABLED", "true" if (docker_enabled or dind) else "false"),
        _env("DOCKERD_IN_RUNNER", "true" if dind else "false"),
        _env("GITHUB_URL", options.runner_base_url),
        _env("RUNNER_WORKDIR", work_dir),
        _env(c.ENV_RUNNER_EPHEMERAL, "true" if ephemeral else "false"),
        _env("RUNNER_STATUS_UPDATE_HOOK", "true" if options.runner_status_update_hook else "false"),
        _env(
            "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT", f"actions-runner-controller/{options.version}"
        ),
    ]
    mtu = config.get("dockerMTU")
    mirror = config.get("dockerRegistryMirror")
    if mirror is None:
        mirror = options.docker_registry_mirror
    if kube_mode:
        wvct = config.get("workVolumeClaimTemplate") or {}
        env += [
            _env(c.ENV_CONTAINER_HOOKS, "/runner/k8s/index.js"),
            _env("ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", "true"),
            {
                "name": "ACTIONS_RUNNER_POD_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
            },
            {
                "name": "ACTIONS_RUNNER_JOB_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            _env(
                "ACTIONS_RUNNER_REQUIRE_SAME_NODE",
                "true" if "ReadWriteOnce" in (wvct.get("accessModes") or []) else "false",
            ),
        ]
    if dind and mtu:
        env.append(_env("MTU", str(mtu)))
    if dind and mirror:
        env.append(_env("DOCKER_REGISTRY_MIRROR", str(mirror)))
    if sidecar:
        env.append(_env("DOCKER_HOST", DOCKER_HOST))
    runner["env"] = env

    volumes: list[JSON] = list(spec.get("volumes") or [])
    runner_mounts: list[JSON] = list(runner.get("volumeMounts") or [])
    user_work = any(v.get("name") == "work" for v in volumes)
    if kube_mode and (user_work or any(m.get("name") == "work" for m in runner_mounts)):
        raise PodBuildError(
            "a user-defined 'work' volume or mount is not allowed in kubernetes mode"
        )
    size = config.get("volumeSizeLimit")
    runner_volume = not _is_zero_quantity(size)
    if not runner_volume and sidecar:
        raise PodBuildError("volumeSizeLimit 0 disables /runner, which the docker sidecar needs")
    if runner_volume:
        empty: JSON = {}
        if config.get("volumeStorageMedium"):
            empty["medium"] = config["volumeStorageMedium"]
        if size is not None:
            empty["sizeLimit"] = size
        volumes.append({"name": "runner", "emptyDir": empty})
        runner_mounts.append({"name": "runner", "mountPath": "/runner"})
    if kube_mode:
        wvct = dict(config.get("workVolumeClaimTemplate") or {})
        volumes.append({"name": "work", "ephemeral": {"volumeClaimTemplate": {"spec": wvct}}})
        runner_mounts.append({"name": "work", "mountPath": work_dir})
    if sidecar:
        assert docker is not None
        if not user_work:
            volumes.append({"name": "work", "emptyDir": {}})
        var_run = {
            "medium": "Memory",
            "sizeLimit": config.get("dockerVarRunVolumeSizeLimit") or "1M",
        }
        volumes.append({"name": "var-run", "emptyDir": var_run})
        runner_mounts += [
            {"name": "work", "mountPath": work_dir},
            {"name": "var-run", "mountPath": "/run"},
        ]
        _docker_sidecar(docker, config, options, image, work_dir, mtu, mirror)
    runner["volumeMounts"] = _dedupe_mounts(runner_mounts)
    spec["volumes"] = volumes

    if dind:
        runner.setdefault("securityContext", {})["privileged"] = True
    selinux = (spec.get("securityContext") or {}).get("seLinuxOptions")
    if selinux:
        runner.setdefault("securityContext", {})["privileged"] = False
        if docker is not None:
            sc = docker.setdefault("securityContext", {})
            sc["privileged"] = False
            sc["seLinuxOptions"] = copy.deepcopy(selinux)
    spec["containers"] = containers
    return tmpl


def _docker_sidecar(
    docker: JSON,
    config: Mapping[str, Any],
    options: LegacyOptions,
    runner_image: str,
    work_dir: str,
    mtu: Any,
    mirror: Any,
) -> None:
    docker.setdefault("image", options.docker_image)
    args = ["dockerd", f"--host={DOCKER_HOST}", *(docker.get("args") or [])]
    args.append("--group=$(DOCKER_GROUP_GID)")
    if mtu:
        args += ["--mtu", str(mtu)]
    if mirror:
        args.append(f"--registry-mirror={mirror}")
    docker["args"] = args
    env = list(docker.get("env") or [])
    if not _has_env(docker, "DOCKER_GROUP_GID"):
        env.append(_env("DOCKER_GROUP_GID", docker_group_gid(runner_image, options.docker_gid)))
    if mtu:
        env.append(_env("DOCKERD_ROOTLESS_ROOTLESSKIT_MTU", str(mtu)))
    docker["env"] = env
    mounts = list(docker.get("volumeMounts") or [])
    mounts += [
        {"name": "runner", "mountPath": "/runner"},
        {"name": "work", "mountPath": work_dir},
        {"name": "var-run", "mountPath": "/run"},
    ]
    docker["volumeMounts"] = _dedupe_mounts(mounts)
    docker.setdefault("securityContext", {}).setdefault("privileged", True)
    docker.setdefault(
        "lifecycle", {"preStop": {"exec": {"command": ["/bin/sh", "-c", _DOCKER_PRE_STOP]}}}
    )


def _dedupe_mounts(mounts: list[JSON]) -> list[JSON]:
    seen: set[str] = set()
    out = []
    for m in mounts:
        key = str(m.get("mountPath"))
        if key in seen:
            continue
        seen.add(key)
        out.append(m)
    return out


def _runner_pod_spec_template(runner: Mapping[str, Any]) -> JSON:
    """The pod template ARC's ``newPod`` starts from: the Runner's RunnerPodSpec fields."""
    spec = objects.spec_of(runner)
    containers = copy.deepcopy(list(spec.get("containers") or []))
    if not containers:
        containers = [{"name": c.CONTAINER_RUNNER}]
        runner_config = RunnerConfigView(spec)
        if runner_config.docker_enabled and not runner_config.dockerd_within_runner_container:
            containers.append({"name": c.CONTAINER_DOCKER})
    for ctr in containers:
        if ctr.get("name") == c.CONTAINER_RUNNER:
            for key in ("imagePullPolicy", "envFrom", "env", "volumeMounts"):
                if not ctr.get(key) and spec.get(key):
                    ctr[key] = copy.deepcopy(spec[key])
            res = spec.get("resources") or {}
            ctr_res = ctr.setdefault("resources", {})
            for key in ("requests", "limits"):
                if not ctr_res.get(key) and res.get(key):
                    ctr_res[key] = copy.deepcopy(res[key])
            if not ctr_res:
                del ctr["resources"]
        elif ctr.get("name") == c.CONTAINER_DOCKER:
            for key, src in (
                ("volumeMounts", "dockerVolumeMounts"),
                ("resources", "dockerdContainerResources"),
                ("env", "dockerEnv"),
            ):
                if not ctr.get(key) and spec.get(src):
                    ctr[key] = copy.deepcopy(spec[src])
    pod_spec: JSON = {"containers": containers}
    if spec.get("volumes"):
        pod_spec["volumes"] = copy.deepcopy(spec["volumes"])
    if spec.get("securityContext"):
        pod_spec["securityContext"] = copy.deepcopy(spec["securityContext"])
    return {"metadata": {}, "spec": pod_spec}


#: Key of the registration token in a Runner's registration Secret.
REGISTRATION_TOKEN_KEY = "token"
#: Label on registration Secrets (its value: the Runner's name).
LABEL_REGISTRATION_SECRET = "actions-runner-controller/registration-token-of"


def registration_secret_name(runner_name: str) -> str:
    """The Secret holding a Runner's registration token (``<runner>-registration``).

    ARC kept the token in ``Runner.status`` and as a literal pod env value, so anyone who
    could read Runners or pods could register a rogue runner for the token's hour; a
    Secret is readable only by who may read Secrets.
    """
    return f"{runner_name}-registration"


def registration_secret(runner: Mapping[str, Any], token: str) -> JSON:
    """The registration Secret of ``runner``, owned by it (deleted with it)."""
    meta = objects.meta(runner)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": registration_secret_name(str(meta["name"])),
            "namespace": meta.get("namespace"),
            "labels": {LABEL_REGISTRATION_SECRET: str(meta["name"])},
            "ownerReferences": [owner_ref(runner)],
        },
        "type": "Opaque",
        "stringData": {REGISTRATION_TOKEN_KEY: token},
    }


def new_runner_pod(runner: Mapping[str, Any], options: LegacyOptions) -> JSON:
    """The pod of a Runner (ARC ``newPod``): named like the runner, restartPolicy Never.

    ``RUNNER_TOKEN`` comes from the runner's registration Secret (``secretKeyRef``),
    never as a literal value.
    """
    meta = objects.meta(runner)
    spec = objects.spec_of(runner)
    name = str(meta["name"])
    # The token's expiry stands for the token in the hash: a new token is a new pod spec.
    token = str((objects.status_of(runner).get("registration") or {}).get("expiresAt") or "")
    rlabels = {k: v for k, v in (meta.get("labels") or {}).items()}
    rannotations = dict(meta.get("annotations") or {})
    hash_input = {
        "labels": {k: v for k, v in rlabels.items() if k != c.LABEL_RUNNER_TEMPLATE_HASH},
        "annotations": rannotations,
        "spec": spec,
        "githubBaseURL": options.runner_base_url,
        "token": token,
    }
    tmpl = _runner_pod_spec_template(runner)
    tmpl["metadata"] = {
        "labels": {**rlabels, c.LABEL_POD_TEMPLATE_HASH: template_hash(hash_input)},
        "annotations": rannotations,
    }
    secret = ((spec.get("githubAPICredentialsFrom") or {}).get("secretRef") or {}).get("name")
    if secret:
        tmpl["metadata"]["annotations"][c.ANNOTATION_GITHUB_API_CREDS_SECRET] = secret
    pod = runner_pod_template(tmpl, spec, options)
    pod_spec = pod["spec"]
    for key in _POD_OVERRIDES:
        if spec.get(key) not in (None, "", [], {}):
            pod_spec[key] = copy.deepcopy(spec[key])
    if not pod_spec.get("imagePullSecrets") and options.runner_image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in options.runner_image_pull_secrets]
    pod_spec["containers"] = pod_spec["containers"] + copy.deepcopy(
        list(spec.get("sidecarContainers") or [])
    )
    if spec.get("initContainers"):
        pod_spec["initContainers"] = copy.deepcopy(spec["initContainers"])
    pod_spec["restartPolicy"] = "Never"
    runner_ctr = next(x for x in pod_spec["containers"] if x.get("name") == c.CONTAINER_RUNNER)
    set_runner_identity(
        runner_ctr,
        name,
        {
            "secretKeyRef": {
                "name": registration_secret_name(name),
                "key": REGISTRATION_TOKEN_KEY,
            }
        },
    )
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    pod["metadata"].update(
        {
            "name": name,
            "namespace": meta.get("namespace"),
            "ownerReferences": [owner_ref(runner)],
        }
    )
    return pod


def set_runner_identity(container: JSON, name: str, token: str | JSON) -> None:
    """``RUNNER_NAME`` and ``RUNNER_TOKEN`` (a value, or a ``valueFrom`` source), unless the
    user already set them."""
    env = container.setdefault("env", [])
    if not _has_env(container, "RUNNER_NAME"):
        env.append(_env("RUNNER_NAME", name))
    if not _has_env(container, "RUNNER_TOKEN"):
        if isinstance(token, str):
            env.append(_env("RUNNER_TOKEN", token))
        else:
            env.append({"name": "RUNNER_TOKEN", "valueFrom": token})


def owner_ref(owner: Mapping[str, Any]) -> JSON:
    meta = objects.meta(owner)
    return {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
