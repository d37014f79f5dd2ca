"""What each field of the scale set CRDs is for, as `kubectl explain` shows it.

Applied by :mod:`gharc.api.descriptions`. Keys are a full path (``.spec.minRunners``),
``parent.name`` or a bare field name; the most specific match wins. Pod template fields
are described elsewhere (pointers to the pod API's documentation).
"""

from __future__ import annotations

_META_TARGETS = {
    "autoscalingListener": "the AutoscalingListener the controller creates for this scale set",
    "ephemeralRunnerConfigSecretMetadata": "each runner's JIT configuration Secret",
    "ephemeralRunnerMetadata": "each EphemeralRunner",
    "ephemeralRunnerSetMetadata": "the EphemeralRunnerSet",
    "listenerConfigSecretMetadata": "the listener's configuration Secret",
    "listenerRoleBindingMetadata": "the listener's RoleBinding",
    "listenerRoleMetadata": "the listener's Role",
    "listenerServiceAccountMetadata": "the listener's ServiceAccount",
    "configSecretMetadata": "the listener's configuration Secret",
    "roleBindingMetadata": "the listener's RoleBinding",
    "roleMetadata": "the listener's Role",
    "serviceAccountMetadata": "the listener's ServiceAccount",
}


def _meta_entries() -> dict[str, str]:
    out: dict[str, str] = {}
    for parent, target in _META_TARGETS.items():
        out[parent] = f"Extra labels and annotations for {target}."
        out[f"{parent}.labels"] = f"Labels added to {target}."
        out[f"{parent}.annotations"] = f"Annotations added to {target}."
    return out


_COUNTS = {
    "currentRunners": "Runners that exist now, in any phase.",
    "currentReplicas": "EphemeralRunners that exist now, in any phase.",
    "pendingEphemeralRunners": "Runners whose pod is not running yet.",
    "runningEphemeralRunners": "Runners whose pod is running (idle or busy with a job).",
    "failedEphemeralRunners": "Runners that failed and are kept for inspection.",
    "finishedEphemeralRunners": "Runners that finished their job and are being removed.",
    "deletingEphemeralRunners": "Runners being deleted.",
}

TABLE: dict[str, str] = {
    **_meta_entries(),
    **{f"status.{k}": v for k, v in _COUNTS.items()},
    # Every object.
    "apiVersion": "API version of this object (actions.github.com/v1alpha1).",
    "kind": "Kind of this object.",
    ".spec": "What the object should be; written by its owner.",
    ".status": "What the controller observed; written by the controller only.",
    # GitHub connection.
    "githubConfigUrl": "Where runners register: https://<host>/<org>, https://<host>/<org>/<repo> "
    "or https://<host>/enterprises/<enterprise>.",
    "githubConfigSecret": "Name of the Secret (same namespace) holding github_token, or "
    "github_app_id, github_app_installation_id and github_app_private_key.",
    "githubServerTLS": "Trust a private CA when talking to a GitHub Enterprise Server.",
    "githubServerTLS.certificateFrom": "Where the CA bundle comes from.",
    "certificateFrom.configMapKeyRef": "A key of a ConfigMap (same namespace) holding the CA "
    "bundle in PEM.",
    "configMapKeyRef.name": "Name of the ConfigMap.",
    "configMapKeyRef.key": "Key of the ConfigMap holding the PEM bundle.",
    "configMapKeyRef.optional": "Whether a missing ConfigMap or key is tolerated.",
    "proxy": "HTTP(S) proxy for traffic to GitHub, used by the controller, listener and runners.",
    "proxy.http": "Proxy for http:// URLs.",
    "proxy.https": "Proxy for https:// URLs.",
    "proxy.noProxy": "Hosts and CIDRs reached without the proxy.",
    "http.url": "Proxy URL, such as http://proxy.internal:3128.",
    "https.url": "Proxy URL, such as http://proxy.internal:3128.",
    "http.credentialSecretRef": "Secret (same namespace) with username and password keys for "
    "the proxy.",
    "https.credentialSecretRef": "Secret (same namespace) with username and password keys for "
    "the proxy.",
    "vaultConfig": "Read the GitHub credentials from a vault instead of a Secret (checked by "
    "the controller: only azure_key_vault).",
    "vaultConfig.type": "Vault kind; azure_key_vault is the only one supported.",
    "vaultConfig.azureKeyVault": "Azure Key Vault coordinates.",
    "vaultConfig.proxy": "Proxy used to reach the vault.",
    "azureKeyVault.url": "URL of the key vault.",
    "azureKeyVault.tenantId": "Azure AD tenant of the identity that reads the vault.",
    "azureKeyVault.clientId": "Client id of the identity that reads the vault.",
    "azureKeyVault.certificatePath": "Path of the client certificate in the listener and "
    "controller pods.",
    "azureKeyVault.secretKey": "Name of the vault secret holding the GitHub credentials.",
    # AutoscalingRunnerSet.
    ".spec.runnerGroup": "Runner group the scale set joins; empty means the default group.",
    ".spec.runnerScaleSetName": "Name of the scale set in GitHub (the runs-on label); defaults "
    "to the object's name.",
    ".spec.runnerScaleSetLabels": "Extra labels of the scale set in GitHub, usable in runs-on "
    "(each 1 to 255 characters, checked by the controller).",
    ".spec.minRunners": "Idle runners kept ready; unset means 0.",
    "scheduledOverrides": "gharc: time windows in which minRunners is another value, e.g. "
    "warm runners on weekday mornings. The first active window wins.",
    "scheduledOverrides.startTime": "When the window starts: RFC 3339, or a local time "
    "without offset in timeZone.",
    "scheduledOverrides.endTime": "When the window ends (same form as startTime).",
    "scheduledOverrides.minRunners": "minRunners during the window; unset leaves it as is.",
    "scheduledOverrides.timeZone": "IANA time zone (Europe/Berlin) of times without an "
    "offset; a recurring window keeps its local hours across daylight saving changes.",
    "scheduledOverrides.recurrenceRule": "How the window repeats; unset means once.",
    "recurrenceRule.frequency": "Daily, Weekly, Monthly or Yearly; empty means once.",
    "recurrenceRule.untilTime": "No occurrence starts after this time.",
    "burst": "gharc: extra idle runners kept while jobs arrive, so the next job of a wave "
    "finds a runner waiting; they decay to none after the last arrival.",
    "burst.runners": "How many extra idle runners while jobs arrive (0: off).",
    "burst.decaySeconds": "Seconds after the last arrival over which the extra runners "
    "fall to none (default 300).",
    ".spec.maxRunners": "Most runners at once; unset means no limit (the controller reports "
    "minRunners above maxRunners as Failed).",
    ".spec.listenerTemplate": "Merged into the listener pod the controller creates.",
    ".spec.listenerMetrics": "Which listener metrics to publish, with which labels and "
    "histogram buckets; unset means the listener's defaults.",
    "listenerMetrics.counters": "Counters by metric name.",
    "listenerMetrics.gauges": "Gauges by metric name.",
    "listenerMetrics.histograms": "Histograms by metric name.",
    "metrics.counters": "Counters by metric name.",
    "metrics.gauges": "Gauges by metric name.",
    "metrics.histograms": "Histograms by metric name.",
    "counters.labels": "Labels the counter carries.",
    "gauges.labels": "Labels the gauge carries.",
    "histograms.labels": "Labels the histogram carries.",
    "histograms.buckets": "Upper bounds of the histogram's buckets, in seconds.",
    ".status.phase": "Pending, Running or Failed (then message says why).",
    ".status.message": "Why the object is not working, when it is not.",
    ".status.observedGeneration": "metadata.generation of the spec the controller last "
    "applied in full.",
    "status.conditions": "Conditions of the object, one per type.",
    "conditions.type": "Condition type, such as ListenerTemplateAllowed.",
    "conditions.status": "True, False or Unknown.",
    "conditions.reason": "Machine-readable reason of the last transition.",
    "conditions.message": "Human-readable details.",
    "conditions.lastTransitionTime": "When status last changed.",
    "conditions.observedGeneration": "metadata.generation the condition was computed for.",
    # EphemeralRunnerSet.
    ".spec.replicas": "Runners wanted, set by the listener; negative counts as 0.",
    ".spec.patchID": "Id of the listener's last scaling decision; finished runners are "
    "cleaned up once per id.",
    ".spec.actionableRevision": "Bumped when the runner template changes, so idle runners of "
    "the old template are replaced.",
    ".spec.ephemeralRunnerMetadata": "Extra labels and annotations for each EphemeralRunner.",
    ".spec.ephemeralRunnerSpec": "Template of each EphemeralRunner.",
    "status.appliedActionableRevision": "The actionableRevision the runners now match.",
    "status.finishedRunnerCleanupPatchID": "The patchID whose finished runners were cleaned up.",
    "status.failedRunnerReplacements": "Failed runners replaced in a row (the replace backoff "
    "step).",
    "status.lastFailedRunnerReplacementTime": "When the last Failed runner was replaced.",
    # EphemeralRunner (spec and the runner template of an EphemeralRunnerSet).
    "runnerScaleSetId": "Id of the scale set in GitHub.",
    "proxySecretRef": "Secret with the proxy environment of the runner, made by the controller.",
    "ephemeralRunnerConfigSecretMetadata": "Extra labels and annotations for the runner's JIT "
    "configuration Secret.",
    ".spec.spec": "Pod spec of the runner.",
    ".spec.metadata": "Labels and annotations of the runner pod.",
    "ephemeralRunnerSpec.spec": "Pod spec of each runner.",
    "ephemeralRunnerSpec.metadata": "Labels and annotations of each runner pod.",
    "status.ready": "Whether the runner pod is ready.",
    "status.reason": "Short reason of a failure (such as TooManyPodFailures).",
    "status.runnerId": "Id of the runner in GitHub.",
    "status.runnerName": "Name of the runner in GitHub.",
    "status.failures": "Pod failures of this object so far (pod UID to time, or a count).",
    "status.jobRequestId": "Request id of the job the runner runs.",
    "status.jobId": "Id of the job the runner runs.",
    "status.jobRepositoryName": "owner/repo of the job the runner runs.",
    "status.jobWorkflowRef": "Workflow reference of the job the runner runs.",
    "status.jobDisplayName": "Display name of the job the runner runs.",
    "status.workflowRunId": "Id of the workflow run of the job.",
    # AutoscalingListener.
    ".spec.autoscalingRunnerSetName": "AutoscalingRunnerSet this listener serves.",
    ".spec.autoscalingRunnerSetNamespace": "Its namespace.",
    ".spec.ephemeralRunnerSetName": "EphemeralRunnerSet the listener scales.",
    ".spec.image": "Image of the listener container.",
    ".spec.imagePullSecrets": "Pull secrets of the listener pod.",
    "imagePullSecrets.name": "Name of a pull Secret.",
    ".spec.metrics": "Which listener metrics to publish.",
    "status.lastFailedPodUID": "UID of the listener pod that failed last.",
    "status.lastFailureTime": "When the listener last failed.",
    "status.lastMessageTime": "When the listener last received a message from GitHub.",
    "status.sessionId": "Message session the listener holds with GitHub.",
}

#: Paths whose meaning depends on the kind.
BY_KIND: dict[str, dict[str, str]] = {
    "AutoscalingRunnerSet": {
        ".spec.template": "Pod template of each runner; its container named runner is the runner.",
    },
    "AutoscalingListener": {
        ".spec.template": "Merged into the listener pod (from the AutoscalingRunnerSet's "
        "listenerTemplate).",
    },
}


def table_for(kind: str) -> dict[str, str]:
    """The description table of one kind."""
    return {**TABLE, **BY_KIND.get(kind, {})}
