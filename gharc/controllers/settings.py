"""Every setting of ``gharc controller``, each declared once: flag, env var, default, help.

Flags keep ARC's names and defaults so the charts' and ARC users' arguments work unchanged
(the chart value that renders a flag is named in its declaration). The parser, the
environment fallback, the values handed to ScaleSetOptions/LegacyOptions and those options'
own defaults (which read ``ControllerSettings.<name>``) are derived from these fields
(:mod:`gharc.settings.declare`); the rules across settings (the namespace scale set mode
needs, credentials in legacy mode) are in :func:`gharc.controllers.main.parse_args`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from gharc.api.legacy.duration import parse_go_duration
from gharc.api.scaleset import constants as c
from gharc.listener import metric_limits as ml
from gharc.settings import common
from gharc.settings.common import GitHubSettings
from gharc.settings.declare import Parse, number, setting

__all__ = [
    "ENV_BUILD_VERSION",
    "ENV_CONTROLLER_IMAGE",
    "ENV_LISTENER_ENTRYPOINT",
    "IGNORED_ARC_FLAGS",
    "LEGACY",
    "LISTENER_MODES",
    "LISTENER_MODE_IN_PROCESS",
    "LISTENER_MODE_POD",
    "ControllerSettings",
]

ENV_CONTROLLER_IMAGE = "CONTROLLER_MANAGER_CONTAINER_IMAGE"
ENV_LISTENER_ENTRYPOINT = "LISTENER_ENTRYPOINT"
ENV_BUILD_VERSION = "GHARC_BUILD_VERSION"
#: The ``--help`` section of the settings only legacy mode reads.
LEGACY = "legacy mode (without --auto-scaling-runner-set-only)"
#: Flags of ARC's charts that gharc accepts, so those arguments do not fail, and ignores.
IGNORED_ARC_FLAGS = ("--workqueue-rate-limiter", "--pprof-addr", "--port", "--update-strategy")
#: ``--listener-mode`` values.
LISTENER_MODE_IN_PROCESS = "InProcess"
LISTENER_MODE_POD = "Pod"
LISTENER_MODES = (LISTENER_MODE_IN_PROCESS, LISTENER_MODE_POD)


def _stripped(text: str) -> str:
    return text.strip()


def _command(text: str) -> tuple[str, ...]:
    return tuple(shlex.split(text))


def go_duration(*, positive: bool = False) -> Parse:
    """A parser of Go durations (``30s``, ``1m``, ``1h30m``) to seconds, never negative."""

    def parse(text: str) -> float:
        try:
            seconds = parse_go_duration(text).total_seconds()
        except ValueError:
            raise ValueError(
                f"{text!r} is not a duration: use Go's form, e.g. 30s, 1m or 1h30m"
            ) from None
        if seconds < 0:
            raise ValueError("must not be negative")
        if positive and seconds == 0:
            raise ValueError("must be positive")
        return seconds

    return parse


@dataclass(kw_only=True)
class ControllerSettings(GitHubSettings):
    """Everything ``gharc controller`` was told, after defaults and the environment.

    The ``GITHUB_*`` credentials and the :data:`LEGACY` section are read in legacy mode
    only; in scale set mode they keep their defaults.
    """

    # -- environment (as ARC) ----------------------------------------------------------------
    controller_namespace: str = setting(
        "",
        env=c.ENV_CONTROLLER_NAMESPACE,
        parse=_stripped,
        help="The controller's own namespace (downward API metadata.namespace), where "
        "listeners run; required in scale set mode, the default Lease namespace in both.",
    )
    listener_image: str = setting(
        "ghcr.io/gharc/gharc:latest",
        env=ENV_CONTROLLER_IMAGE,
        parse=_stripped,
        help="The listener image (the controller's own).",
    )
    listener_command: tuple[str, ...] = setting(
        ("gharc", "listener"),
        env=ENV_LISTENER_ENTRYPOINT,
        parse=_command,
        shown_default="gharc listener",
        help="The listener command, split as a shell would.",
    )
    build_version: str = setting(
        "dev",
        env=ENV_BUILD_VERSION,
        parse=_stripped,
        help="Version compared with AutoscalingRunnerSets' app.kubernetes.io/version labels "
        "(dev: no version gate). gharc does not gate on its package version: an ARC-installed "
        "set carries ARC's chart version, and deleting it is never what a user switching to "
        "gharc wants.",
    )
    # -- both modes --------------------------------------------------------------------------
    auto_scaling_runner_set_only: bool = setting(
        False,
        flag="--auto-scaling-runner-set-only",
        help="Run scale set mode (actions.github.com). Without it: legacy mode.",
    )
    metrics_addr: str = common.metrics_addr(chart="metrics.controllerManagerAddr")
    health_probe_bind_address: str = setting(
        "",
        flag="--health-probe-bind-address",
        chart="flags.healthProbeBindAddress",
        help="Bind address of /healthz and /readyz; empty disables.",
    )
    enable_leader_election: bool = setting(
        False,
        flag="--enable-leader-election",
        help="Run reconcilers only on the holder of a Lease.",
    )
    leader_election_id: str = setting(
        "actions-runner-controller", flag="--leader-election-id", help="The Lease name."
    )
    leader_election_namespace: str = setting(
        "",
        flag="--leader-election-namespace",
        help="Namespace of the Lease (default: the controller's namespace).",
    )
    shards: int = setting(
        1,
        flag="--shards",
        parse=number(int, minimum=1),
        chart="flags.shards",
        help="Scale set mode: split the scale sets over this many shard Leases "
        "(ID-shard-0, ID-shard-1, ... where ID is --leader-election-id) that the replicas "
        "share out fairly; each replica "
        "reconciles and hosts the listeners of the scale sets of the shards it holds. 1: one "
        "replica acts for all (with --enable-leader-election, the holder of the leader Lease). "
        "Every replica must be given the same number (gharc).",
    )
    log_level: str = common.log_level(chart="flags.logLevel", help="Also given to listeners.")
    log_format: str = common.log_format(chart="flags.logFormat", help="Also given to listeners.")
    watch_namespace: str = setting(
        "",
        flag="--watch-namespace",
        aliases=("--watch-single-namespace",),
        chart="flags.watchSingleNamespace",
        help="Reconcile the objects of this namespace only (--watch-single-namespace is "
        "ARC's scale set name).",
    )
    k8s_client_qps: float = setting(
        300.0,
        flag="--k8s-client-rate-limiter-qps",
        chart="flags.k8sClientRateLimiterQPS",
        help="Client-side QPS (ARC: 20). gharc makes about 21 calls per job, so 300 allows "
        "~14 jobs/s; API priority and fairness protects the server.",
    )
    k8s_client_burst: int = setting(
        600,
        flag="--k8s-client-rate-limiter-burst",
        chart="flags.k8sClientRateLimiterBurst",
        help="Client-side burst.",
    )
    k8s_client_max_in_flight_per_namespace: int = setting(
        8,
        flag="--k8s-client-max-in-flight-per-namespace",
        chart="flags.k8sClientMaxInFlightPerNamespace",
        help="Kubernetes requests one namespace (tenant) may have in flight at once, watches "
        "excepted; while another tenant's namespace sent a request in the last 5 s, a quarter "
        "of it (at least 1), and an eighth for a namespace whose requests queue (a burst); "
        "0 lifts the limit. Keeps one scale set's burst from "
        "filling the API server's queue in front of another tenant's requests (gharc).",
    )
    k8s_client_backlog_rest: float = setting(
        1.0,
        flag="--k8s-client-backlog-rest",
        chart="flags.k8sClientBacklogRest",
        parse=number(float, minimum=0),
        help="While another tenant's namespace is busy, a namespace with a whole cap's worth of "
        "requests queued (a burst) waits after each request for this share of the time the "
        "request took, leaving the API server the rest to others: 1 keeps another tenant's "
        "pickup within 1.6x of its quiet value beside a 400-runner burst on a 2-core "
        "cluster, at the burst's cost (its pickup p50 +50 %). 0: no rest (gharc).",
    )
    kubeconfig: str | None = common.kubeconfig()
    # -- scale set mode ----------------------------------------------------------------------
    exclude_label_propagation_prefixes: tuple[str, ...] = setting(
        (),
        flag="--exclude-label-propagation-prefix",
        chart="flags.excludeLabelPropagationPrefixes",
        help="Label prefix not copied onto child objects (repeatable).",
    )
    auto_scaler_image_pull_secrets: tuple[str, ...] = setting(
        (),
        flag="--auto-scaler-image-pull-secrets",
        split=True,
        option="listener_image_pull_secrets",
        chart="imagePullSecrets",
        help="imagePullSecrets of listener pods (repeatable or comma-separated).",
    )
    allow_unrestricted_listener_template: bool = setting(
        False,
        flag="--allow-unrestricted-listener-template",
        chart="flags.allowUnrestrictedListenerTemplate",
        help="Merge any listenerTemplate into listener pods, as ARC does (extra containers, "
        "volumes, host namespaces, security contexts). Listener pods run in the controller's "
        "namespace: single-tenant clusters only (docs/security.md).",
    )
    runner_max_concurrent_reconciles: int = setting(
        32,
        flag="--runner-max-concurrent-reconciles",
        parse=number(int, minimum=1),
        chart="flags.runnerMaxConcurrentReconciles",
        help="Workers of the EphemeralRunner controller (ARC: 2; reconciles are async I/O).",
    )
    runner_registration_sync_interval: float = setting(
        # One list call per GitHub scope a minute (the answer covers every scale set of
        # the scope; sets with no runner are looked at every 10th pass), so a zombie is
        # replaced within about two minutes (issue 19 §6).
        60.0,
        flag="--runner-registration-sync-interval",
        option="registration_sync_interval",
        chart="flags.runnerRegistrationSyncInterval",
        help="Seconds between reconciles of each scale set's runners against GitHub's "
        "runner list (replaces runners whose registration was deleted, removes orphan "
        "registrations; one list call per GitHub scope, covering all its scale sets). "
        "0 turns it off.",
    )
    runner_registration_grace: float = setting(
        120.0,  # long enough for any cache lag or registration race
        flag="--runner-registration-grace",
        option="registration_sync_grace",
        chart="flags.runnerRegistrationGrace",
        help="Seconds a runner must be old (a registration seen orphaned) before the "
        "registration reconcile repairs it, so a registration in flight is never mistaken.",
    )
    runner_hang_timeout: float = setting(
        # A runner exits within seconds of its job; five minutes leaves any post-job
        # cleanup its time and still frees the slot in minutes.
        300.0,
        flag="--runner-hang-timeout",
        chart="flags.runnerHangTimeout",
        help="Seconds a runner's pod may keep running after its job completed and GitHub "
        "dropped its registration before it is deleted (a hung runner process, checked by "
        "the registration reconcile). 0 turns it off.",
    )
    runner_startup_timeout: float = setting(
        600.0,
        flag="--runner-startup-timeout",
        parse=number(float, minimum=0),
        chart="flags.runnerStartupTimeout",
        help="Seconds a runner that has not come online yet (pod not running) is spared by "
        "scale down, so the job it was made for is not cancelled while its pod waits for a "
        "node; after it a stuck runner may be scaled down.",
    )
    max_runners_per_scale_set: int = setting(
        0,
        flag="--max-runners-per-scale-set",
        parse=number(int, minimum=0),
        chart="flags.maxRunnersPerScaleSet",
        help="Most runners any one scale set may have, whatever its maxRunners, minRunners "
        "or scheduled overrides ask (the set reports the condition RunnersCapped); 0: no "
        "limit, as in ARC. For a controller shared by teams (gharc).",
    )
    node_loss_timeout: float = setting(
        # Kubernetes already waits 40 s without heartbeats before it marks a node Unknown;
        # a further minute rides out a kubelet restart or a short network partition, and
        # replaces the runners of a dead node within two minutes.
        60.0,
        flag="--node-loss-timeout",
        parse=number(float, minimum=0),
        chart="flags.nodeLossTimeout",
        help="Seconds a node may be not Ready (or gone) before its runner and listener "
        "pods are declared dead and replaced; 0 turns node loss handling off (always off "
        "with --watch-single-namespace: Nodes are cluster-scoped).",
    )
    listener_metrics_addr: str = setting(
        ":8080",
        flag="--listener-metrics-addr",
        chart="metrics.listenerAddr",
        help='Metrics address written into listener configs; "0" disables.',
    )
    listener_metrics_endpoint: str = setting(
        "/metrics",
        flag="--listener-metrics-endpoint",
        chart="metrics.listenerEndpoint",
        help="Listener metrics path.",
    )
    # A tenant's listenerMetrics spends the controller's memory and scrape time (issue 26):
    # the defaults' reasons are in gharc/listener/metric_limits.py.
    listener_metrics_max_buckets: int = setting(
        ml.MAX_HISTOGRAM_BUCKETS,
        flag="--listener-metrics-max-buckets",
        parse=number(int, positive=True),
        help="Buckets kept per listener histogram; a listenerMetrics histogram with more "
        "keeps its first ones (logged once; in process also a ListenerMetricsLimited event).",
    )
    listener_metrics_max_label_values: int = setting(
        ml.MAX_LABEL_VALUES,
        flag="--listener-metrics-max-label-values",
        parse=number(int, positive=True),
        help="Distinct values per listener metric label (job_name, repository...) per scale "
        'set; further values are counted as "other" (logged once, and an event in process).',
    )
    listener_metrics_max_series: int = setting(
        ml.MAX_SERIES,
        flag="--listener-metrics-max-series",
        parse=number(int, positive=True),
        help="Samples one scale set's listener metrics may have; new label combinations "
        'beyond it are counted with labels "other" (logged once, and an event in process).',
    )
    listener_mode: str = setting(
        LISTENER_MODE_IN_PROCESS,
        flag="--listener-mode",
        choices=LISTENER_MODES,
        chart="flags.listenerMode",
        help="InProcess: every scale set's listener runs as a task of the elected "
        "controller, and a standby replica takes over their sessions; Pod: one listener pod "
        "per scale set in the controller's namespace, as ARC does.",
    )
    release_sessions_on_stop: bool = setting(
        False,
        flag="--release-sessions-on-stop",
        chart="flags.releaseSessionsOnStop",
        help="On SIGTERM the elected controller deletes its in-process listeners' message "
        "sessions and removes its own marks from ARC's objects (the message-session-id "
        "annotation on EphemeralRunnerSets, the GitHub Secret finalizer), so that ARC's "
        "listeners take over within one long poll. For a rollback to ARC or an uninstall "
        "(docs/migration-from-arc.md#rollback); without it a stopping gharc leaves sessions "
        "to its successor, which resumes them.",
    )
    # -- legacy mode (actions.summerwind.dev) -------------------------------------------------
    runner_github_url: str = setting(
        "",
        flag="--runner-github-url",
        parse=_stripped,
        group=LEGACY,
        help="GITHUB_URL given to runner pods (default: the GitHub server URL).",
    )
    runner_image: str = setting(
        "summerwind/actions-runner:latest",
        flag="--runner-image",
        group=LEGACY,
        help="Runner image.",
    )
    runner_image_pull_secrets: tuple[str, ...] = setting(
        (),
        flag="--runner-image-pull-secret",
        split=True,
        group=LEGACY,
        help="imagePullSecret added to runner pods without any (repeatable).",
    )
    docker_image: str = setting(
        "docker:dind", flag="--docker-image", group=LEGACY, help="Image of the docker sidecar."
    )
    docker_gid: str = setting(
        "1001",
        flag="--docker-gid",
        group=LEGACY,
        help="Default DOCKER_GROUP_GID of runner containers.",
    )
    docker_registry_mirror: str = setting(
        "",
        flag="--docker-registry-mirror",
        group=LEGACY,
        help="Registry mirror for the docker sidecar.",
    )
    runner_status_update_hook: bool = setting(
        False,
        flag="--runner-status-update-hook",
        group=LEGACY,
        help="Let runners report their status into Runner objects.",
    )
    common_runner_labels: tuple[str, ...] = setting(
        (),
        flag="--common-runner-labels",
        split=True,
        group=LEGACY,
        help="Runner labels added to every RunnerDeployment/RunnerSet (comma-separated).",
    )
    default_scale_down_delay: float = setting(
        600.0,
        flag="--default-scale-down-delay",
        parse=go_duration(),
        shown_default="10m",
        group=LEGACY,
        help="Go duration an HRA waits after a scale out before scaling down.",
    )
    sync_period: float = setting(
        60.0,
        flag="--sync-period",
        parse=go_duration(positive=True),
        shown_default="1m",
        group=LEGACY,
        help="Go duration between re-evaluations of each HorizontalRunnerAutoscaler.",
    )
    # -- not settings ------------------------------------------------------------------------
    option_overrides: dict[str, Any] = field(default_factory=dict)
    """:class:`ScaleSetOptions` (scale set mode) or :class:`LegacyOptions` (legacy mode)
    fields to override (tests shorten backoffs)."""

    @property
    def legacy(self) -> bool:
        return not self.auto_scaling_runner_set_only
