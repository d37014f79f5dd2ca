"""The four scale set CRDs (``actions.github.com/v1alpha1``) as Python definitions.

This module is the single source of truth: ``python -m gharc.api.generate`` renders it into
``gharc/api/crds/actions.github.com_*.yaml`` and a unit test fails when the YAML on disk
differs from what this module produces.

Field names and shapes follow ARC's CRDs (chart ``gha-runner-scale-set-controller``) so
manifests written for ARC apply unchanged. Where gharc differs, it is deliberate and noted:

- No validation rule stricter than ARC's: every object ARC's CRDs accept is accepted, so
  an object stored under ARC's CRDs can still be updated (and its finalizer removed) after
  the switch. What ARC's chart or controller checked (the 45-character name limit,
  ``minRunners <= maxRunners``, a URL and a secret, scale set label lengths, the vault
  type) is checked by the ARS reconciler, which reports a violation as phase ``Failed``,
  ``status.message`` and a Warning event.
- Status fields behaviours.md needs: ARS ``observedGeneration``; ERS
  ``spec.actionableRevision``, ``status.appliedActionableRevision``,
  ``status.finishedRunnerCleanupPatchID``; listener failure accounting; ARS/ERS
  ``finishedEphemeralRunners``/``deletingEphemeralRunners``, which ARC's printer columns
  already pointed at but its status never had.
- ERS ``status.currentReplicas`` is not ``required`` (ARC's is): a required status field
  turns every partial status merge patch on a fresh object into a 422.
"""

from __future__ import annotations

import copy
from typing import Any

from gharc.api import crdbuild
from gharc.api.crdbuild import object_schema, printer_column, root_schema
from gharc.api.podtemplate import Schema, embedded_object_meta, string_map
from gharc.api.scaleset import constants as c

# --- shared sub-types --------------------------------------------------------------------


def _string() -> Schema:
    return {"type": "string"}


def _int(minimum: int | None = None, fmt: str | None = None) -> Schema:
    out: Schema = {"type": "integer"}
    if fmt:
        out["format"] = fmt
    if minimum is not None:
        out["minimum"] = minimum
    return out


def _strings() -> Schema:
    return {"type": "array", "items": _string()}


_object = object_schema


def resource_meta() -> Schema:
    """ARC ``ResourceMeta``: labels/annotations for an object the controller creates."""
    return _object({"annotations": string_map(), "labels": string_map()})


def proxy_config() -> Schema:
    """ARC ``ProxyConfig``."""
    server = _object({"credentialSecretRef": _string(), "url": _string()})
    return _object({"http": server, "https": copy.deepcopy(server), "noProxy": _strings()})


def tls_config() -> Schema:
    """ARC ``TLSConfig``: a CA bundle from a ConfigMap key (core ``ConfigMapKeySelector``)."""
    selector = _object(
        {
            "key": _string(),
            "name": {"type": "string", "default": ""},
            "optional": {"type": "boolean"},
        },
        required=["key"],
    )
    selector["x-kubernetes-map-type"] = "atomic"
    return _object({"certificateFrom": _object({"configMapKeyRef": selector})})


def vault_config() -> Schema:
    """ARC ``VaultConfig``. ``azure_key_vault`` is the only vault ARC supports.

    ``secretKey`` is not in ARC's CRD, but ARC's Helm chart renders it; accepting it keeps
    ``helm template | kubectl apply`` (strict field validation) working.
    """
    azure = _object(
        {
            "certificatePath": _string(),
            "clientId": _string(),
            "secretKey": _string(),
            "tenantId": _string(),
            "url": _string(),
        },
        required=["certificatePath", "clientId", "tenantId", "url"],
    )
    return _object(
        {
            "azureKeyVault": azure,
            "proxy": proxy_config(),
            "type": _string(),
        }
    )


def metrics_config() -> Schema:
    """ARC ``MetricsConfig``: which listener metrics to expose, with which labels."""
    labelled = _object({"labels": _strings()}, required=["labels"])
    histogram = _object(
        {"buckets": {"type": "array", "items": {"type": "number"}}, "labels": _strings()},
        required=["labels"],
    )
    return _object(
        {
            "counters": {"type": "object", "additionalProperties": labelled},
            "gauges": {"type": "object", "additionalProperties": copy.deepcopy(labelled)},
            "histograms": {"type": "object", "additionalProperties": histogram},
        }
    )


def image_pull_secrets() -> Schema:
    """``[]corev1.LocalObjectReference``."""
    ref = _object({"name": {"type": "string", "default": ""}})
    ref["x-kubernetes-map-type"] = "atomic"
    return {"type": "array", "items": ref}


MAX_SCHEDULED_OVERRIDES = 16
"""Most ``scheduledOverrides`` one AutoscalingRunnerSet may hold (the API server refuses more)."""


def scheduled_overrides() -> Schema:
    """gharc: windows with another ``minRunners`` (the legacy HRA's ``scheduledOverrides``)."""
    override = _object(
        {
            "endTime": _string(),
            "minRunners": _int(minimum=0),
            "recurrenceRule": _object(
                {
                    "frequency": {
                        "type": "string",
                        "enum": ["", "Daily", "Weekly", "Monthly", "Yearly"],
                    },
                    "untilTime": _string(),
                }
            ),
            "startTime": _string(),
            "timeZone": _string(),
        },
        required=["endTime", "startTime"],
    )
    # Each override is evaluated on every reconcile and capacity check of the shared
    # controller; a few windows say any real week, and a bound keeps one tenant's cheap.
    return {"type": "array", "items": override, "maxItems": MAX_SCHEDULED_OVERRIDES}


def burst_config() -> Schema:
    """gharc: extra idle runners while jobs arrive, decaying to none."""
    return _object({"decaySeconds": _int(minimum=1), "runners": _int(minimum=0)})


def conditions() -> Schema:
    """``[]metav1.Condition``, keyed by ``type`` (gharc: ARS ``ListenerTemplateAllowed``)."""
    condition = _object(
        {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": _int(minimum=0, fmt="int64"),
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {"type": "string", "maxLength": 316},
        },
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )
    return {
        "type": "array",
        "items": condition,
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    }


_root = root_schema


# --- per kind ----------------------------------------------------------------------------


def ephemeral_runner_spec(pod_template: Schema) -> Schema:
    """ARC ``EphemeralRunnerSpec``: runner settings plus an inline ``PodTemplateSpec``."""
    props = pod_template["properties"]
    return _object(
        {
            "ephemeralRunnerConfigSecretMetadata": resource_meta(),
            "githubConfigSecret": _string(),
            "githubConfigUrl": _string(),
            "githubServerTLS": tls_config(),
            "metadata": copy.deepcopy(props.get("metadata", embedded_object_meta())),
            "proxy": proxy_config(),
            "proxySecretRef": _string(),
            "runnerScaleSetId": _int(),
            "spec": copy.deepcopy(props["spec"]),
            "vaultConfig": vault_config(),
        },
        required=["githubConfigSecret", "githubConfigUrl", "runnerScaleSetId"],
    )


def autoscaling_runner_set_schema(pod_template: Schema) -> Schema:
    """AutoscalingRunnerSet: what a user (or Helm) writes."""
    spec = _object(
        {
            "autoscalingListener": resource_meta(),
            "ephemeralRunnerConfigSecretMetadata": resource_meta(),
            "ephemeralRunnerMetadata": resource_meta(),
            "ephemeralRunnerSetMetadata": resource_meta(),
            "githubConfigSecret": _string(),
            "githubConfigUrl": _string(),
            "githubServerTLS": tls_config(),
            "listenerConfigSecretMetadata": resource_meta(),
            "listenerMetrics": metrics_config(),
            "listenerRoleBindingMetadata": resource_meta(),
            "listenerRoleMetadata": resource_meta(),
            "listenerServiceAccountMetadata": resource_meta(),
            "listenerTemplate": copy.deepcopy(pod_template),
            "maxRunners": _int(minimum=0),
            "minRunners": _int(minimum=0),
            "burst": burst_config(),
            "proxy": proxy_config(),
            "runnerGroup": _string(),
            "scheduledOverrides": scheduled_overrides(),
            "runnerScaleSetLabels": _strings(),
            "runnerScaleSetName": _string(),
            "template": copy.deepcopy(pod_template),
            "vaultConfig": vault_config(),
        },
    )
    status = _object(
        {
            "conditions": conditions(),
            "currentRunners": _int(),
            "deletingEphemeralRunners": _int(),
            "failedEphemeralRunners": _int(),
            "finishedEphemeralRunners": _int(),
            "message": _string(),
            "observedGeneration": _int(fmt="int64"),
            "pendingEphemeralRunners": _int(),
            "phase": _string(),
            "runningEphemeralRunners": _int(),
        }
    )
    return _root(spec, status)


def ephemeral_runner_set_schema(pod_template: Schema) -> Schema:
    """EphemeralRunnerSet: owned by the ARS controller, scaled by the listener."""
    spec = _object(
        {
            "actionableRevision": _int(minimum=0, fmt="int64"),
            "ephemeralRunnerMetadata": resource_meta(),
            "ephemeralRunnerSpec": ephemeral_runner_spec(pod_template),
            "patchID": _int(),
            "replicas": _int(),
        },
        required=["patchID"],
    )
    status = _object(
        {
            "appliedActionableRevision": _int(minimum=0, fmt="int64"),
            # gharc: the Failed-runner replace backoff, kept across restarts, and its condition.
            "conditions": conditions(),
            "currentReplicas": _int(),
            "deletingEphemeralRunners": _int(),
            "failedEphemeralRunners": _int(),
            "finishedEphemeralRunners": _int(),
            "failedRunnerReplacements": _int(minimum=0),
            "finishedRunnerCleanupPatchID": _int(),
            "lastFailedRunnerReplacementTime": {"type": "string", "format": "date-time"},
            "pendingEphemeralRunners": _int(),
            "phase": _string(),
            "runningEphemeralRunners": _int(),
        }
    )
    return _root(spec, status)


def ephemeral_runner_schema(pod_template: Schema) -> Schema:
    """EphemeralRunner: one runner (JIT config secret + pod)."""
    status = _object(
        {
            "failures": {
                "type": "object",
                "additionalProperties": {"type": "string", "format": "date-time"},
            },
            "jobDisplayName": _string(),
            "jobId": _string(),
            "jobRepositoryName": _string(),
            "jobRequestId": _int(fmt="int64"),
            "jobWorkflowRef": _string(),
            "message": _string(),
            "phase": _string(),
            "ready": {"type": "boolean"},
            "reason": _string(),
            "runnerId": _int(),
            "runnerName": _string(),
            "workflowRunId": _int(fmt="int64"),
        }
    )
    return _root(ephemeral_runner_spec(pod_template), status)


def autoscaling_listener_schema(pod_template: Schema) -> Schema:
    """AutoscalingListener: built by the ARS controller, lives in the controller namespace.

    ``status`` (empty in ARC) carries the failure accounting of behaviours B1.
    """
    spec = _object(
        {
            "autoscalingRunnerSetName": _string(),
            "autoscalingRunnerSetNamespace": _string(),
            "configSecretMetadata": resource_meta(),
            "ephemeralRunnerSetName": _string(),
            "githubConfigSecret": _string(),
            "githubConfigUrl": _string(),
            "githubServerTLS": tls_config(),
            "image": _string(),
            "imagePullSecrets": image_pull_secrets(),
            "maxRunners": _int(minimum=0),
            "metrics": metrics_config(),
            "minRunners": _int(minimum=0),
            "proxy": proxy_config(),
            "roleBindingMetadata": resource_meta(),
            "roleMetadata": resource_meta(),
            "runnerScaleSetId": _int(),
            "burst": burst_config(),
            "scheduledOverrides": scheduled_overrides(),
            "serviceAccountMetadata": resource_meta(),
            "template": copy.deepcopy(pod_template),
            "vaultConfig": vault_config(),
        }
    )
    status = _object(
        {
            "failures": _int(minimum=0),
            "lastFailedPodUID": _string(),
            "lastFailureTime": {"type": "string", "format": "date-time"},
            # gharc: the message session the listener holds and when it last got a message.
            "lastMessageTime": {"type": "string", "format": "date-time"},
            "message": _string(),
            "phase": _string(),
            "sessionId": _string(),
        }
    )
    return _root(spec, status)


# --- CRD objects -------------------------------------------------------------------------


def _col(name: str, path: str, kind: str = "integer") -> dict[str, str]:
    return printer_column(name, path, kind)


_KINDS: list[tuple[str, str, Any, list[dict[str, str]]]] = [
    (
        c.KIND_AUTOSCALING_RUNNER_SET,
        c.PLURAL_AUTOSCALING_RUNNER_SETS,
        autoscaling_runner_set_schema,
        [
            _col("Minimum Runners", ".spec.minRunners"),
            _col("Maximum Runners", ".spec.maxRunners"),
            _col("Current Runners", ".status.currentRunners"),
            _col("Phase", ".status.phase", "string"),
            _col("Pending Runners", ".status.pendingEphemeralRunners"),
            _col("Running Runners", ".status.runningEphemeralRunners"),
            _col("Finished Runners", ".status.finishedEphemeralRunners"),
            _col("Deleting Runners", ".status.deletingEphemeralRunners"),
        ],
    ),
    (
        c.KIND_EPHEMERAL_RUNNER_SET,
        c.PLURAL_EPHEMERAL_RUNNER_SETS,
        ephemeral_runner_set_schema,
        [
            _col("DesiredReplicas", ".spec.replicas"),
            _col("CurrentReplicas", ".status.currentReplicas"),
            _col("Pending Runners", ".status.pendingEphemeralRunners"),
            _col("Running Runners", ".status.runningEphemeralRunners"),
            _col("Finished Runners", ".status.finishedEphemeralRunners"),
            _col("Deleting Runners", ".status.deletingEphemeralRunners"),
            _col("Phase", ".status.phase", "string"),
        ],
    ),
    (
        c.KIND_EPHEMERAL_RUNNER,
        c.PLURAL_EPHEMERAL_RUNNERS,
        ephemeral_runner_schema,
        [
            _col("GitHub Config URL", ".spec.githubConfigUrl", "string"),
            _col("RunnerId", ".status.runnerId", "number"),
            _col("Phase", ".status.phase", "string"),
            _col("JobRepository", ".status.jobRepositoryName", "string"),
            _col("JobWorkflowRef", ".status.jobWorkflowRef", "string"),
            _col("WorkflowRunId", ".status.workflowRunId", "number"),
            _col("JobDisplayName", ".status.jobDisplayName", "string"),
            _col("JobId", ".status.jobId", "string"),
            _col("Message", ".status.message", "string"),
            _col("Age", ".metadata.creationTimestamp", "date"),
        ],
    ),
    (
        c.KIND_AUTOSCALING_LISTENER,
        c.PLURAL_AUTOSCALING_LISTENERS,
        autoscaling_listener_schema,
        [
            _col("GitHub Configure URL", ".spec.githubConfigUrl", "string"),
            _col("AutoscalingRunnerSet Namespace", ".spec.autoscalingRunnerSetNamespace", "string"),
            _col("AutoscalingRunnerSet Name", ".spec.autoscalingRunnerSetName", "string"),
            _col("Failures", ".status.failures"),
            _col("Phase", ".status.phase", "string"),
        ],
    ),
]


def crd(kind: str, plural: str, schema: Schema, columns: list[dict[str, str]]) -> dict[str, Any]:
    """One scale set CRD (no short names, as ARC's)."""
    return crdbuild.crd(c.GROUP, c.VERSION, kind, plural, schema, columns)


def crds(pod_template: Schema) -> list[dict[str, Any]]:
    """All four scale set CRDs, given the structural ``PodTemplateSpec`` schema."""
    return [
        crd(kind, plural, build(pod_template), columns) for kind, plural, build, columns in _KINDS
    ]
