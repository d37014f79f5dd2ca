"""Exact strings and object-naming rules of scale set mode (``actions.github.com/v1alpha1``).

Every controller, the listener and the simulator import these instead of spelling the
strings themselves: an ARC user's cluster already carries objects with these finalizers,
labels and names, so one typo would orphan objects or make two controllers fight. The
naming helpers reproduce ARC's hashing (FNV-1a 32 + apimachinery's ``SafeEncodeString``)
bit for bit, so gharc finds the listener, proxy secrets, roles and bindings that an ARC
controller created before the switch.
"""

from __future__ import annotations

from typing import Any, Final

from gharc.kube import objects

# --- API group ---------------------------------------------------------------------------

GROUP: Final = "actions.github.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND_AUTOSCALING_RUNNER_SET: Final = "AutoscalingRunnerSet"
KIND_EPHEMERAL_RUNNER_SET: Final = "EphemeralRunnerSet"
KIND_EPHEMERAL_RUNNER: Final = "EphemeralRunner"
KIND_AUTOSCALING_LISTENER: Final = "AutoscalingListener"

PLURAL_AUTOSCALING_RUNNER_SETS: Final = "autoscalingrunnersets"
PLURAL_EPHEMERAL_RUNNER_SETS: Final = "ephemeralrunnersets"
PLURAL_EPHEMERAL_RUNNERS: Final = "ephemeralrunners"
PLURAL_AUTOSCALING_LISTENERS: Final = "autoscalinglisteners"

# --- Finalizers (spec 2.1) ---------------------------------------------------------------

FINALIZER_AUTOSCALING_RUNNER_SET: Final = "autoscalingrunnerset.actions.github.com/finalizer"
FINALIZER_AUTOSCALING_LISTENER: Final = "autoscalinglistener.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER_SET: Final = "ephemeralrunnerset.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER: Final = "ephemeralrunner.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER_REGISTRATION: Final = (
    "ephemeralrunner.actions.github.com/runner-registration-finalizer"
)
#: Put by the Helm chart on the Roles/RoleBindings/ServiceAccounts/Secret it creates in the
#: ARS namespace; the controller only ever removes it (when the ARS goes away).
FINALIZER_CLEANUP_PROTECTION: Final = "actions.github.com/cleanup-protection"
#: gharc: on the GitHub config Secret an AutoscalingRunnerSet uses, until that scale set is
#: finalized (it needs the credentials to delete its GitHub scale set).
FINALIZER_GITHUB_SECRET_PROTECTION: Final = "actions.github.com/github-secret-protection"

# --- Labels (spec 2.2) -------------------------------------------------------------------

LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_VERSION: Final = "app.kubernetes.io/version"
LABEL_SCALE_SET_NAME: Final = "actions.github.com/scale-set-name"
LABEL_SCALE_SET_NAMESPACE: Final = "actions.github.com/scale-set-namespace"
LABEL_GITHUB_ENTERPRISE: Final = "actions.github.com/enterprise"
LABEL_GITHUB_ORGANIZATION: Final = "actions.github.com/organization"
LABEL_GITHUB_REPOSITORY: Final = "actions.github.com/repository"
LABEL_LISTENER_NAME: Final = "auto-scaling-listener-name"
LABEL_LISTENER_NAMESPACE: Final = "auto-scaling-listener-namespace"
LABEL_EPHEMERAL_RUNNER: Final = "actions-ephemeral-runner"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
#: Set by the container hook (kubernetes mode) on the job pods/secrets it creates.
LABEL_RUNNER_POD: Final = "runner-pod"
LABEL_KUBERNETES_OS: Final = "kubernetes.io/os"

LABEL_VALUE_PART_OF: Final = "gha-runner-scale-set"
COMPONENT_RUNNER_SET: Final = "runner-set"
COMPONENT_LISTENER: Final = "runner-scale-set-listener"
COMPONENT_RUNNER: Final = "runner"
#: What the Helm chart puts on the AutoscalingRunnerSet itself.
COMPONENT_AUTOSCALING_RUNNER_SET: Final = "autoscaling-runner-set"
LABEL_VALUE_EPHEMERAL_RUNNER: Final = "True"
LABEL_VALUE_KUBERNETES_OS_LINUX: Final = "linux"

#: Kubernetes' limit on a label value; also the limit ARC's URL labels are trimmed to.
LABEL_VALUE_MAX_LENGTH: Final = 63
LABEL_VALUE_TRIM_SUFFIX: Final = "-trim"

# --- Annotations (spec 2.3) --------------------------------------------------------------

#: ARC's hash annotation. gharc does not compute integrity hashes (behaviours B4: it tracks
#: generations and revisions instead) but must recognise and tolerate the key on objects an
#: ARC controller left behind.
ANNOTATION_INTEGRITY_HASH: Final = "actions.github.com/integrity-hash"
#: Deliberately not prefixed: that is how ARC spells it.
ANNOTATION_RUNNER_SCALE_SET_ID: Final = "runner-scale-set-id"
ANNOTATION_RUNNER_GROUP_NAME: Final = "actions.github.com/runner-group-name"
ANNOTATION_RUNNER_SCALE_SET_NAME: Final = "actions.github.com/runner-scale-set-name"
ANNOTATION_PATCH_ID: Final = "actions.github.com/patch-id"
#: gharc: the message session of the listener serving this EphemeralRunnerSet, so that a
#: successor takes it over instead of waiting out a 409 (no-job-stranded, dead listener).
ANNOTATION_MESSAGE_SESSION_ID: Final = "actions.github.com/message-session-id"
#: gharc: the GitHub config Secret this AutoscalingRunnerSet protected with a finalizer.
ANNOTATION_PROTECTED_GITHUB_SECRET: Final = "actions.github.com/protected-github-secret"
ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: Final = "actions.github.com/cleanup-manager-role-binding"
ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: Final = "actions.github.com/cleanup-manager-role-name"
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-role-name"
)
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-role-binding-name"
)
ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-service-account-name"
)
ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: Final = "actions.github.com/cleanup-github-secret-name"
ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-no-permission-service-account-name"
)
#: Written by Helm only; read by no controller.
ANNOTATION_VALUES_HASH: Final = "actions.github.com/values-hash"

#: The cleanup annotations in the order ARC removes the finalizers they point at.
CLEANUP_ANNOTATIONS: Final = (
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING,
    ANNOTATION_CLEANUP_MANAGER_ROLE_NAME,
)

# --- Containers, env vars, misc (spec 2.4) -----------------------------------------------

RUNNER_CONTAINER_NAME: Final = "runner"
LISTENER_CONTAINER_NAME: Final = "listener"

ENV_RUNNER_JIT_CONFIG: Final = "ACTIONS_RUNNER_INPUT_JITCONFIG"
ENV_RUNNER_EXTRA_USER_AGENT: Final = "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"
ENV_RUNNER_DEPRECATED_EXIT_CODE: Final = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
ENV_RUNNER_CONTAINER_HOOKS: Final = "ACTIONS_RUNNER_CONTAINER_HOOKS"
ENV_HTTP_PROXY: Final = "http_proxy"
ENV_HTTPS_PROXY: Final = "https_proxy"
ENV_NO_PROXY: Final = "no_proxy"
ENV_LISTENER_CONFIG_PATH: Final = "LISTENER_CONFIG_PATH"
LISTENER_CONFIG_PATH: Final = "/etc/gha-listener/config.json"
#: Namespace the controller runs in; listeners and their pods live there.
ENV_CONTROLLER_NAMESPACE: Final = "CONTROLLER_MANAGER_POD_NAMESPACE"

#: Key of the JIT config in the per-runner Secret.
SECRET_KEY_JIT_TOKEN: Final = "jitToken"
#: Key of the listener configuration in the listener config Secret.
SECRET_KEY_LISTENER_CONFIG: Final = "config.json"
#: Keys of a proxy credential Secret (``credentialSecretRef``).
SECRET_KEY_PROXY_USERNAME: Final = "username"
SECRET_KEY_PROXY_PASSWORD: Final = "password"

#: Exit code of a runner whose version GitHub no longer accepts.
RUNNER_EXIT_CODE_VERSION_DEPRECATED: Final = 7
USER_AGENT_PREFIX: Final = "actions-runner-controller/"

DEFAULT_LISTENER_LOG_LEVEL: Final = "debug"
DEFAULT_LISTENER_LOG_FORMAT: Final = "text"
DEFAULT_LISTENER_ENTRYPOINT: Final = "/ghalistener"

REASON_INVALID_POD: Final = "InvalidPod"
REASON_TOO_MANY_POD_FAILURES: Final = "TooManyPodFailures"

#: Field-index key used to list objects by controlling owner.
INDEX_OWNER: Final = ".metadata.controller"

#: What a nil ``maxRunners`` means for the listener.
MAX_RUNNERS_UNLIMITED: Final = 2**31 - 1


def max_runners_or_unlimited(value: Any) -> int:
    """``maxRunners`` as a number: unset (None) means unlimited, ``MaxInt32``.

    ARC applies this default once, where the controller builds the listener; here too it is
    this one function, used by the typed model, the listener builder, the listener config
    the controller writes and the listener reading a hand-written config.
    """
    return MAX_RUNNERS_UNLIMITED if value is None else int(value)


#: Longest AutoscalingRunnerSet name ARC's chart allows: ``<name>-<8>-listener`` <= 63.
MAX_AUTOSCALING_RUNNER_SET_NAME_LENGTH: Final = 45
#: Scale set labels must be non-empty and shorter than this.
MAX_SCALE_SET_LABEL_LENGTH: Final = 256

# --- Phases ------------------------------------------------------------------------------

PHASE_PENDING: Final = "Pending"
PHASE_RUNNING: Final = "Running"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_FAILED: Final = "Failed"
PHASE_OUTDATED: Final = "Outdated"

#: EphemeralRunner phases for which ``IsDone()`` holds.
EPHEMERAL_RUNNER_DONE_PHASES: Final = frozenset({PHASE_SUCCEEDED, PHASE_FAILED, PHASE_OUTDATED})

# --- Hashing (spec 4) --------------------------------------------------------------------

#: apimachinery ``rand`` alphabet: no vowels (no words) and no look-alike characters.
_SAFE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193


def fnv1a_32(data: bytes) -> int:
    """FNV-1a 32-bit hash, as Go's ``hash/fnv.New32a``."""
    h = _FNV32_OFFSET
    for byte in data:
        h ^= byte
        h = (h * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode_string(s: str) -> str:
    """apimachinery ``rand.SafeEncodeString``: map each byte onto the safe alphabet."""
    return "".join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in s.encode())


def fnv_hash_string(s: str) -> str:
    """ARC's ``hash.FNVHashString``: FNV-1a 32 of ``s``, as decimal, safe-encoded."""
    return safe_encode_string(str(fnv1a_32(s.encode())))


def _first8(s: str) -> str:
    return s[:8]


# --- Names of generated objects (spec 4) -------------------------------------------------


def listener_hash_suffix(namespace: str, runner_group: str, github_config_url: str) -> str:
    """Eight characters that tie a listener name to the ARS's namespace, group and URL.

    Changing ``runnerGroup`` or ``githubConfigUrl`` therefore changes the listener's name.
    """
    return _first8(fnv_hash_string(f"{namespace}@{runner_group}@{github_config_url}"))


def listener_name(
    ars_name: str, ars_namespace: str, runner_group: str, github_config_url: str
) -> str:
    """Name of the AutoscalingListener of an ARS: ``<ARS>-<hash8>-listener``.

    The same name is used for the listener's ServiceAccount, Role, RoleBinding and Pod.
    """
    suffix = listener_hash_suffix(ars_namespace, runner_group, github_config_url)
    return f"{ars_name}-{suffix}-listener"


def listener_name_for(ars: dict[str, Any]) -> str:
    """:func:`listener_name` of an AutoscalingRunnerSet object (a dict as the API returns it)."""
    meta = objects.meta(ars)
    spec = objects.spec_of(ars)
    return listener_name(
        meta.get("name", ""),
        meta.get("namespace", ""),
        spec.get("runnerGroup") or "",
        spec.get("githubConfigUrl") or "",
    )


def listener_service_account_name(listener: str) -> str:
    """The listener's ServiceAccount (controller namespace) is named like the listener."""
    return listener


def listener_role_name(listener: str) -> str:
    """The listener's Role (ARS namespace) is named like the listener."""
    return listener


def listener_role_binding_name(listener: str) -> str:
    """The listener's RoleBinding (ARS namespace) is named like the listener."""
    return listener


def listener_pod_name(listener: str) -> str:
    """The listener's Pod (controller namespace) is named like the listener."""
    return listener


def listener_config_secret_name(listener: str) -> str:
    """Secret holding the listener's ``config.json``."""
    return f"{listener}-config"


def listener_proxy_secret_name(listener: str) -> str:
    """Secret with the listener's proxy settings (only when ``spec.proxy`` is set)."""
    return f"{listener}-proxy"


def ephemeral_runner_set_name(ars_name: str) -> str:
    """The EphemeralRunnerSet of an ARS has exactly the ARS's name (1:1 since ARC #4516)."""
    return ars_name


def ephemeral_runner_generate_name(ers_name: str) -> str:
    """``metadata.generateName`` of the EphemeralRunners of a set."""
    return f"{ers_name}-runner-"


def ephemeral_runner_set_proxy_secret_name(ers_name: str, ers_namespace: str) -> str:
    """Proxy Secret of an EphemeralRunnerSet: ``<ERS>-<hash8(namespace)>-runner-proxy``."""
    return f"{ers_name}-{_first8(fnv_hash_string(ers_namespace))}-runner-proxy"


def runner_pod_name(ephemeral_runner_name: str) -> str:
    """The runner Pod is named like its EphemeralRunner."""
    return ephemeral_runner_name


def runner_jit_secret_name(ephemeral_runner_name: str) -> str:
    """The JIT config Secret is named like its EphemeralRunner."""
    return ephemeral_runner_name


def trim_label_value(value: str) -> str:
    """ARC's ``trimLabelValue`` for the GitHub URL labels.

    Values longer than 63 become their first 58 characters + ``-trim``; shorter ones only
    lose leading/trailing ``-``, ``_`` and ``.`` (which a label value may not start or end
    with). Faithful to ARC: a long value is not also stripped.
    """
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        keep = LABEL_VALUE_MAX_LENGTH - len(LABEL_VALUE_TRIM_SUFFIX)
        return value[:keep] + LABEL_VALUE_TRIM_SUFFIX
    return value.strip("-_.")


def github_url_labels(
    enterprise: str = "", organization: str = "", repository: str = ""
) -> dict[str, str]:
    """Labels ARC derives from a parsed ``githubConfigUrl`` (only the non-empty parts).

    Parsing the URL is the GitHub client's business; this only names and trims.
    """
    labels: dict[str, str] = {}
    for key, value in (
        (LABEL_GITHUB_ENTERPRISE, enterprise),
        (LABEL_GITHUB_ORGANIZATION, organization),
        (LABEL_GITHUB_REPOSITORY, repository),
    ):
        if value:
            labels[key] = trim_label_value(value)
    return labels


def listener_role_rules(ephemeral_runner_set_names: list[str]) -> list[dict[str, Any]]:
    """Rules of the listener's Role (ARC ``rulesForListenerRole``).

    Patch the named EphemeralRunnerSets (replicas/patchID), patch EphemeralRunners and
    their status (job fields). Unlike ARC, the listener may also get and watch its own
    EphemeralRunnerSet (by name only): it answers the set's finished-runner cleanup marker
    (behaviours B3) with a fresh count instead of leaving the gap until the next message.
    """
    return [
        {
            "apiGroups": [GROUP],
            "resources": [PLURAL_EPHEMERAL_RUNNER_SETS],
            "resourceNames": list(ephemeral_runner_set_names),
            "verbs": ["get", "list", "watch", "patch"],
        },
        {
            "apiGroups": [GROUP],
            "resources": [PLURAL_EPHEMERAL_RUNNERS, f"{PLURAL_EPHEMERAL_RUNNERS}/status"],
            "verbs": ["patch"],
        },
    ]
