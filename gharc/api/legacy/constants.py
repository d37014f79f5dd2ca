"""Exact strings of legacy mode (``actions.summerwind.dev/v1alpha1``, legacy.md section 1).

Controllers, the webhook server and the simulator import these instead of spelling the
strings: clusters migrating from ARC already carry objects with these labels, annotations
and finalizers, and one typo would orphan pods (a finalizer nobody removes) or make two
controllers fight over the same runner.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

# --- API group ---------------------------------------------------------------------------

GROUP: Final = "actions.summerwind.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND_RUNNER: Final = "Runner"
KIND_RUNNER_REPLICA_SET: Final = "RunnerReplicaSet"
KIND_RUNNER_DEPLOYMENT: Final = "RunnerDeployment"
KIND_RUNNER_SET: Final = "RunnerSet"
KIND_HORIZONTAL_RUNNER_AUTOSCALER: Final = "HorizontalRunnerAutoscaler"

PLURAL_RUNNERS: Final = "runners"
PLURAL_RUNNER_REPLICA_SETS: Final = "runnerreplicasets"
PLURAL_RUNNER_DEPLOYMENTS: Final = "runnerdeployments"
PLURAL_RUNNER_SETS: Final = "runnersets"
PLURAL_HORIZONTAL_RUNNER_AUTOSCALERS: Final = "horizontalrunnerautoscalers"

SHORT_NAMES: Final[dict[str, list[str]]] = {
    KIND_RUNNER_DEPLOYMENT: ["rdeploy"],
    KIND_RUNNER_REPLICA_SET: ["rrs"],
    KIND_HORIZONTAL_RUNNER_AUTOSCALER: ["hra"],
}

# --- Labels (1.1) ------------------------------------------------------------------------

LABEL_RUNNER_TEMPLATE_HASH: Final = "runner-template-hash"
LABEL_RUNNER_DEPLOYMENT_NAME: Final = "runner-deployment-name"
LABEL_RUNNER_SET_NAME: Final = "runnerset-name"
LABEL_RUNNER: Final = "actions-runner"
LABEL_INJECT_REGISTRATION_TOKEN: Final = "actions-runner-controller/inject-registration-token"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_RUNNER_POD: Final = "runner-pod"
LABEL_RUNNER_STATEFULSET_NAME: Final = "runner-statefulset-name"
LABEL_PENDING_CLEANUP: Final = "pending-cleanup"

# --- Annotations (1.2) -------------------------------------------------------------------

ANNOTATION_PREFIX: Final = "actions-runner/"
ANNOTATION_RUNNER_ID: Final = "actions-runner/id"
ANNOTATION_UNREGISTRATION_REQUEST_TIMESTAMP: Final = (
    "actions-runner/unregistration-request-timestamp"
)
ANNOTATION_UNREGISTRATION_START_TIMESTAMP: Final = "actions-runner/unregistration-start-timestamp"
ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP: Final = (
    "actions-runner/unregistration-complete-timestamp"
)
ANNOTATION_UNREGISTRATION_FAILURE_MESSAGE: Final = "actions-runner/unregistration-failure-message"
ANNOTATION_RUNNER_COMPLETION_WAIT_START_TIMESTAMP: Final = (
    "actions-runner/runner-completion-wait-start-timestamp"
)
ANNOTATION_GITHUB_API_CREDS_SECRET: Final = "actions-runner/github-api-creds-secret"
ANNOTATION_TOKEN_EXPIRES_AT: Final = "actions-runner-controller/token-expires-at"
#: Defined by ARC but unused since v0.22 (legacy.md 4.8); kept so nothing else reuses it.
ANNOTATION_LAST_REGISTRATION_CHECK_TIME: Final = (
    "actions-runner-controller/last-registration-check-time"
)
ANNOTATION_SYNC_TIME: Final = "sync-time"

# --- Finalizers (1.3) --------------------------------------------------------------------

FINALIZER_RUNNER: Final = "runner.actions.summerwind.dev"
FINALIZER_RUNNER_POD: Final = "actions.summerwind.dev/runner-pod"
FINALIZER_LINKED_RESOURCES: Final = "actions.summerwind.dev/linked-resources"

# --- Container and env names -------------------------------------------------------------

CONTAINER_RUNNER: Final = "runner"
CONTAINER_DOCKER: Final = "docker"
ENV_RUNNER_EPHEMERAL: Final = "RUNNER_EPHEMERAL"
ENV_CONTAINER_HOOKS: Final = "ACTIONS_RUNNER_CONTAINER_HOOKS"
CONTAINER_MODE_KUBERNETES: Final = "kubernetes"

# --- Timings (legacy.md 9) ---------------------------------------------------------------

#: A cached registration token is reused only while it has more than this left (B6).
REGISTRATION_TOKEN_MIN_REMAINING: Final = timedelta(minutes=30)
RETRY_DELAY_ON_CREATE_REGISTRATION_ERROR: Final = timedelta(minutes=3)
UNREGISTRATION_RETRY_DELAY: Final = timedelta(minutes=1)
RETRY_DELAY_WAITING_FOR_RUNNER_ID: Final = timedelta(seconds=10)
RETRY_DELAY_ON_RATE_LIMIT: Final = timedelta(seconds=30)
REGISTRATION_TIMEOUT: Final = timedelta(minutes=10)
POD_RECREATION_DELAY_AFTER_WEBHOOK_SCALE: Final = timedelta(minutes=10)
FORCE_DELETE_AFTER: Final = timedelta(minutes=1)
LINKED_RESOURCES_RETRY_DELAY: Final = timedelta(seconds=30)
#: RunnerSet does nothing once it owns more StatefulSets than this (a loop guard).
MAX_STATEFULSETS_PER_RUNNER_SET: Final = 1000
