"""The legacy CRDs (``actions.summerwind.dev/v1alpha1``) as Python definitions.

``python -m gharc.api.generate`` renders them into
``gharc/api/crds/actions.summerwind.dev_*.yaml``; a unit test fails when the files on disk
are stale. Field names and shapes follow ARC's ``apis/actions.summerwind.net/v1alpha1``
types, so manifests written for ARC apply unchanged. Pod-level types (containers,
volumes, affinity, ...) are cut out of the stored ``PodTemplateSpec`` schema, so they
validate exactly what the pod API validates.

Nothing here is stricter than ARC's CRDs, so an object stored under ARC's CRDs stays
writable after the switch:

- ARC checked "exactly one of enterprise, organization, repository" (and "kubernetes
  container mode needs workVolumeClaimTemplate") in an optional admission webhook; gharc's
  runner controllers report those as Warning events, the schema does not reject them.
- The pod fields ARC copies into ``RunnerPodSpec`` (``containers``, ``env``, ``volumes``,
  ...) are plain lists there, not the pod API's keyed lists: a Runner with two ``env``
  entries of one name is valid under ARC's CRD (the pod API accepts it too).
- Status fields are never ``required``: a required status field turns every partial status
  merge patch on a fresh object into a 422.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gharc.api import crdbuild
from gharc.api.crdbuild import object_schema, printer_column, root_schema
from gharc.api.legacy import constants as c
from gharc.api.legacy.hra_schema import horizontal_runner_autoscaler_schema
from gharc.api.podtemplate import Schema, embedded_object_meta, int_or_string, quantity


def _string(pattern: str | None = None) -> Schema:
    out: Schema = {"type": "string"}
    if pattern:
        out["pattern"] = pattern
    return out


def _int(fmt: str | None = None) -> Schema:
    out: Schema = {"type": "integer"}
    if fmt:
        out["format"] = fmt
    return out


def _bool() -> Schema:
    return {"type": "boolean"}


def _time(nullable: bool = False) -> Schema:
    out: Schema = {"type": "string", "format": "date-time"}
    if nullable:
        out["nullable"] = True
    return out


def _nullable(schema: Schema) -> Schema:
    return {**schema, "nullable": True}


def _strings() -> Schema:
    return {"type": "array", "items": _string()}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": copy.deepcopy(items)}


_object = object_schema


def _plain_list(schema: Schema) -> Schema:
    """``schema`` without list or map type (ARC's own slices and maps carry no markers)."""
    schema.pop("x-kubernetes-list-type", None)
    schema.pop("x-kubernetes-list-map-keys", None)
    schema.pop("x-kubernetes-map-type", None)
    return schema


class _Pod:
    """Pieces of the stored pod schema, deep-copied on every access."""

    def __init__(self, pod_template: Schema) -> None:
        self.template = pod_template
        self.spec: Schema = pod_template["properties"]["spec"]
        self._props: dict[str, Schema] = self.spec["properties"]
        self._container: Schema = self._props["containers"]["items"]["properties"]
        eph = self._props["volumes"]["items"]["properties"]["ephemeral"]
        self._pvc_spec: Schema = eph["properties"]["volumeClaimTemplate"]["properties"]["spec"]
        tsc = self._props["topologySpreadConstraints"]["items"]["properties"]
        self._label_selector: Schema = tsc["labelSelector"]

    def field(self, name: str) -> Schema:
        return copy.deepcopy(self._props[name])

    def container_field(self, name: str) -> Schema:
        return copy.deepcopy(self._container[name])

    def plain_field(self, name: str) -> Schema:
        """A pod field as ARC declares it in ``RunnerPodSpec``: no list or map type."""
        return _plain_list(self.field(name))

    def plain_container_field(self, name: str) -> Schema:
        """A container field as ARC declares it in ``RunnerPodSpec``: no list type."""
        return _plain_list(self.container_field(name))

    def pvc_spec(self) -> Schema:
        return copy.deepcopy(self._pvc_spec)

    def label_selector(self, nullable: bool = False) -> Schema:
        out = copy.deepcopy(self._label_selector)
        if nullable:
            out["nullable"] = True
        return out


# --- RunnerConfig + RunnerPodSpec --------------------------------------------------------


def runner_config() -> dict[str, Schema]:
    """ARC ``RunnerConfig`` properties (shared by Runner and RunnerSet)."""
    return {
        "containerMode": _string(),
        "dockerEnabled": _bool(),
        "dockerMTU": _int("int64"),
        "dockerRegistryMirror": _string(),
        "dockerVarRunVolumeSizeLimit": quantity(),
        "dockerdWithinRunnerContainer": _bool(),
        "enterprise": _string("^[^/]+$"),
        "ephemeral": _bool(),
        "githubAPICredentialsFrom": _object(
            {"secretRef": _object({"name": _string()}, required=["name"])}
        ),
        "group": _string(),
        "image": _string(),
        "labels": _strings(),
        "organization": _string("^[^/]+$"),
        "repository": _string("^[^/]+/[^/]+$"),
        "volumeSizeLimit": quantity(),
        "volumeStorageMedium": _string(),
        "workDir": _string(),
    }


def work_volume_claim_template(pod: _Pod) -> Schema:
    """ARC ``WorkVolumeClaimTemplate``: the ephemeral ``work`` PVC of kubernetes mode."""
    return _object(
        {
            "accessModes": _strings(),
            "resources": copy.deepcopy(pod.pvc_spec()["properties"]["resources"]),
            "storageClassName": _string(),
        },
        required=["accessModes", "resources", "storageClassName"],
    )


def runner_pod_spec(pod: _Pod) -> dict[str, Schema]:
    """ARC ``RunnerPodSpec`` properties: pod fields a Runner copies into its pod."""
    same_as_pod = [
        "affinity",
        "automountServiceAccountToken",
        "containers",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "ephemeralContainers",
        "hostAliases",
        "imagePullSecrets",
        "initContainers",
        "nodeSelector",
        "priorityClassName",
        "runtimeClassName",
        "securityContext",
        "serviceAccountName",
        "terminationGracePeriodSeconds",
        "tolerations",
        "topologySpreadConstraints",
        "volumes",
    ]
    out = {name: pod.plain_field(name) for name in same_as_pod}
    out.update(
        {
            "dockerEnv": pod.plain_container_field("env"),
            "dockerVolumeMounts": pod.plain_container_field("volumeMounts"),
            "dockerdContainerResources": pod.container_field("resources"),
            "env": pod.plain_container_field("env"),
            "envFrom": pod.plain_container_field("envFrom"),
            "imagePullPolicy": _string(),
            "resources": pod.container_field("resources"),
            "sidecarContainers": pod.plain_field("containers"),
            "volumeMounts": pod.plain_container_field("volumeMounts"),
            "workVolumeClaimTemplate": work_volume_claim_template(pod),
        }
    )
    return out


def runner_spec(pod: _Pod) -> Schema:
    """ARC ``RunnerSpec`` = RunnerConfig + RunnerPodSpec."""
    return _object({**runner_config(), **runner_pod_spec(pod)})


def runner_template(pod: _Pod) -> Schema:
    """ARC ``RunnerTemplate``: metadata + RunnerSpec."""
    return _object({"metadata": embedded_object_meta(), "spec": runner_spec(pod)})


_root = root_schema


# --- per kind ----------------------------------------------------------------------------


def runner_schema(pod: _Pod) -> Schema:
    """Runner: one runner pod and its registration token."""
    registration = _object(
        {
            "enterprise": _string(),
            "expiresAt": _time(),
            "labels": _strings(),
            "organization": _string(),
            "repository": _string(),
            "token": _string(),
        }
    )
    workflow = _object(
        {
            k: _string()
            for k in (
                "action",
                "job",
                "name",
                "repository",
                "repositoryOwner",
                "runID",
                "runNumber",
            )
        }
    )
    workflow["nullable"] = True
    status = _object(
        {
            "lastRegistrationCheckTime": _time(nullable=True),
            "message": _string(),
            "phase": _string(),
            "ready": _bool(),
            "reason": _string(),
            "registration": registration,
            "workflow": workflow,
        }
    )
    return _root(runner_spec(pod), status)


def _replicated_spec(pod: _Pod) -> Schema:
    return _object(
        {
            "effectiveTime": _time(nullable=True),
            "replicas": _nullable(_int()),
            "selector": pod.label_selector(nullable=True),
            "template": runner_template(pod),
        },
        required=["template"],
    )


def runner_replica_set_schema(pod: _Pod) -> Schema:
    """RunnerReplicaSet: N Runners of one template hash."""
    status = _object({"availableReplicas": _int(), "readyReplicas": _int(), "replicas": _int()})
    return _root(_replicated_spec(pod), status)


def _deployment_status() -> Schema:
    return _object(
        {
            "availableReplicas": _int(),
            "desiredReplicas": _int(),
            "readyReplicas": _int(),
            "replicas": _int(),
            "updatedReplicas": _int(),
        }
    )


def runner_deployment_schema(pod: _Pod) -> Schema:
    """RunnerDeployment: rolls RunnerReplicaSets on template changes."""
    return _root(_replicated_spec(pod), _deployment_status())


def persistent_volume_claim(pod: _Pod) -> Schema:
    """A full ``PersistentVolumeClaim`` as a StatefulSet ``volumeClaimTemplates`` item."""
    return _object(
        {
            "apiVersion": _string(),
            "kind": _string(),
            "metadata": embedded_object_meta(),
            "spec": pod.pvc_spec(),
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
    )


def stateful_set_spec(pod: _Pod) -> dict[str, Schema]:
    """``apps/v1 StatefulSetSpec`` properties (inlined into RunnerSet)."""
    return {
        "minReadySeconds": _int("int32"),
        "ordinals": _object({"start": _int("int32")}),
        "persistentVolumeClaimRetentionPolicy": _object(
            {"whenDeleted": _string(), "whenScaled": _string()}
        ),
        "podManagementPolicy": _string(),
        "replicas": _int("int32"),
        "revisionHistoryLimit": _int("int32"),
        "selector": pod.label_selector(),
        "serviceName": _string(),
        "template": copy.deepcopy(pod.template),
        "updateStrategy": _object(
            {
                "rollingUpdate": _object(
                    {"maxUnavailable": int_or_string(), "partition": _int("int32")}
                ),
                "type": _string(),
            }
        ),
        "volumeClaimTemplates": {
            **_array(persistent_volume_claim(pod)),
            "x-kubernetes-list-type": "atomic",
        },
    }


def runner_set_schema(pod: _Pod) -> Schema:
    """RunnerSet: RunnerConfig + a StatefulSetSpec; scaled as one-replica StatefulSets."""
    spec = _object(
        {
            **runner_config(),
            **stateful_set_spec(pod),
            "effectiveTime": _time(nullable=True),
            "serviceAccountName": _string(),
            "workVolumeClaimTemplate": work_volume_claim_template(pod),
        },
        required=["selector", "template"],
    )
    return _root(spec, _deployment_status())


# --- CRD objects -------------------------------------------------------------------------


def _col(name: str, path: str, kind: str = "number") -> dict[str, str]:
    return printer_column(name, path, kind)


_AGE = _col("Age", ".metadata.creationTimestamp", "date")


def _scope_columns(prefix: str) -> list[dict[str, str]]:
    return [
        _col("Enterprise", f"{prefix}.enterprise", "string"),
        _col("Organization", f"{prefix}.organization", "string"),
        _col("Repository", f"{prefix}.repository", "string"),
        _col("Group", f"{prefix}.group", "string"),
        _col("Labels", f"{prefix}.labels", "string"),
    ]


_REPLICA_COLUMNS = [
    _col("Desired", ".spec.replicas"),
    _col("Current", ".status.replicas"),
    _col("Up-To-Date", ".status.updatedReplicas"),
    _col("Available", ".status.availableReplicas"),
]

_KINDS: list[tuple[str, str, Callable[[_Pod], Schema], list[dict[str, str]]]] = [
    (
        c.KIND_RUNNER,
        c.PLURAL_RUNNERS,
        runner_schema,
        [
            *_scope_columns(".spec"),
            _col("Status", ".status.phase", "string"),
            _col("Message", ".status.message", "string"),
            _col("WF Repo", ".status.workflow.repository", "string"),
            _col("WF Run", ".status.workflow.runID", "string"),
            _AGE,
        ],
    ),
    (
        c.KIND_RUNNER_REPLICA_SET,
        c.PLURAL_RUNNER_REPLICA_SETS,
        runner_replica_set_schema,
        [
            _col("Desired", ".spec.replicas"),
            _col("Current", ".status.replicas"),
            _col("Ready", ".status.readyReplicas"),
            _AGE,
        ],
    ),
    (
        c.KIND_RUNNER_DEPLOYMENT,
        c.PLURAL_RUNNER_DEPLOYMENTS,
        runner_deployment_schema,
        [*_scope_columns(".spec.template.spec"), *_REPLICA_COLUMNS, _AGE],
    ),
    (c.KIND_RUNNER_SET, c.PLURAL_RUNNER_SETS, runner_set_schema, [*_REPLICA_COLUMNS, _AGE]),
    (
        c.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
        c.PLURAL_HORIZONTAL_RUNNER_AUTOSCALERS,
        lambda _pod: horizontal_runner_autoscaler_schema(),
        [
            _col("Min", ".spec.minReplicas"),
            _col("Max", ".spec.maxReplicas"),
            _col("Desired", ".status.desiredReplicas"),
            _col("Schedule", ".status.scheduledOverridesSummary", "string"),
            _AGE,
        ],
    ),
]


def crd(kind: str, plural: str, schema: Schema, columns: list[dict[str, str]]) -> dict[str, Any]:
    """One legacy CRD, with ARC's short names (``kubectl get rd``)."""
    return crdbuild.crd(
        c.GROUP, c.VERSION, kind, plural, schema, columns, c.SHORT_NAMES.get(kind, ())
    )


def crds(pod_template: Schema) -> list[dict[str, Any]]:
    """All five legacy CRDs, given the structural ``PodTemplateSpec`` schema."""
    pod = _Pod(pod_template)
    return [crd(kind, plural, build(pod), columns) for kind, plural, build, columns in _KINDS]
