"""``gharc controller``: the controller manager (ARC ``main.go``), in one of two modes.

- **Scale set mode** (``--auto-scaling-runner-set-only``, what the controller chart passes):
  the AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner and AutoscalingListener
  controllers of ``actions.github.com``.
- **Legacy mode** (without that flag, as in ARC): the ``actions.summerwind.dev`` controllers
  runner, runnerreplicaset, runnerdeployment, runnerset, runnerpod and
  horizontalrunnerautoscaler (legacy.md 7), with controller-wide GitHub credentials from
  ``--github-token`` or the ``--github-app-*`` triple (env ``GITHUB_*``).

Flags keep ARC's names and defaults so the charts' and ARC users' arguments work unchanged.
Parsing is plain argparse, separate from running: :func:`parse_args` turns argv + the
environment into :class:`ControllerArgs` (or raises :class:`UsageError` with a message a
human can act on), and :func:`run_controller` runs a manager for those arguments until
SIGTERM. Tests and the demo call :func:`run_controller` in-process.

Environment (as ARC):

- ``CONTROLLER_MANAGER_POD_NAMESPACE`` (required in scale set mode): where listeners and
  their pods live. Legacy mode does not need it (it is the default leader election
  namespace there).
- ``GITHUB_TOKEN``, ``GITHUB_APP_ID``, ``GITHUB_APP_INSTALLATION_ID``,
  ``GITHUB_APP_PRIVATE_KEY``, ``GITHUB_URL``, ``GITHUB_ENTERPRISE_URL`` (legacy mode): the
  defaults of the flags of the same name.
- ``CONTROLLER_MANAGER_CONTAINER_IMAGE``: the listener image (the controller's own).
- ``LISTENER_ENTRYPOINT``: the listener command (split like a shell would).
- ``GHARC_BUILD_VERSION``: the version compared with ARS ``app.kubernetes.io/version``
  labels (default ``dev``: the version gate is off). gharc does not gate on its own package
  version: an ARC-installed ARS carries ARC's chart version, and deleting it on upgrade
  is never what a user switching to gharc wants.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gharc.api.scaleset import constants as c
from gharc.controllers.legacy.timeutil import parse_go_duration
from gharc.github.config import server_url
from gharc.kube.logging import LOG_LEVELS

log = logging.getLogger("gharc.controller")

ENV_CONTROLLER_IMAGE = "CONTROLLER_MANAGER_CONTAINER_IMAGE"
ENV_LISTENER_ENTRYPOINT = "LISTENER_ENTRYPOINT"
ENV_BUILD_VERSION = "GHARC_BUILD_VERSION"

#: ARC's envconfig names (prefix ``GITHUB``) -> ControllerArgs fields; a flag wins over env.
GITHUB_ENV = {
    "GITHUB_TOKEN": "github_token",
    "GITHUB_APP_ID": "github_app_id",
    "GITHUB_APP_INSTALLATION_ID": "github_app_installation_id",
    "GITHUB_APP_PRIVATE_KEY": "github_app_private_key",
    "GITHUB_URL": "github_url",
    "GITHUB_ENTERPRISE_URL": "github_enterprise_url",
}
DEFAULT_GITHUB_API_URL = "https://api.github.com/"


class UsageError(ValueError):
    """The controller cannot start with these flags or this environment."""


@dataclass
class ControllerArgs:
    """Everything ``gharc controller`` was told, after defaults and the environment."""

    controller_namespace: str
    listener_image: str = "ghcr.io/gharc/gharc:latest"
    listener_command: tuple[str, ...] = ("gharc", "listener")
    auto_scaling_runner_set_only: bool = True
    metrics_addr: str = "0"  # off unless asked for, as in ARC's chart
    health_probe_bind_address: str = ""
    enable_leader_election: bool = False
    leader_election_id: str = "actions-runner-controller"
    leader_election_namespace: str = ""
    log_level: str = "debug"
    log_format: str = "text"
    watch_namespace: str = ""
    exclude_label_propagation_prefixes: tuple[str, ...] = ()
    auto_scaler_image_pull_secrets: tuple[str, ...] = ()
    allow_unrestricted_listener_template: bool = False
    runner_max_concurrent_reconciles: int = 32
    runner_registration_sync_interval: float = 60.0
    runner_registration_grace: float = 120.0
    runner_hang_timeout: float = 300.0
    runner_startup_timeout: float = 600.0
    node_loss_timeout: float = 60.0
    listener_metrics_addr: str = ":8080"
    listener_metrics_endpoint: str = "/metrics"
    k8s_client_qps: float = 300.0
    k8s_client_burst: int = 600
    kubeconfig: str | None = None
    build_version: str = "dev"
    listener_mode: str = "InProcess"
    """``--listener-mode``: ``InProcess`` (listeners are tasks of the elected controller) or
    ``Pod`` (one listener pod per scale set, as ARC)."""
    # -- legacy mode (actions.summerwind.dev) --------------------------------------------
    github_token: str = ""
    github_app_id: str = ""
    github_app_installation_id: str = ""
    github_app_private_key: str = ""
    """PEM text, or the path of a PEM file (ARC: a path if that file exists)."""
    github_url: str = ""
    """The GitHub API URL (ARC's ``--github-url``; default ``https://api.github.com/``)."""
    github_enterprise_url: str = ""
    runner_github_url: str = ""
    runner_image: str = "summerwind/actions-runner:latest"
    runner_image_pull_secrets: tuple[str, ...] = ()
    docker_image: str = "docker:dind"
    docker_gid: str = "1001"
    docker_registry_mirror: str = ""
    runner_status_update_hook: bool = False
    common_runner_labels: tuple[str, ...] = ()
    default_scale_down_delay: float = 600.0
    """Seconds (``--default-scale-down-delay``, a Go duration such as ``10m``)."""
    sync_period: float = 60.0
    """Seconds (``--sync-period``): how often each HRA is re-evaluated."""
    option_overrides: dict[str, Any] = field(default_factory=dict)
    """Not a flag: :class:`ScaleSetOptions` (scale set mode) or :class:`LegacyOptions`
    (legacy mode) fields to override (tests shorten backoffs)."""

    @property
    def legacy(self) -> bool:
        return not self.auto_scaling_runner_set_only


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gharc controller",
        description="Run the scale set controllers (AutoscalingRunnerSet, EphemeralRunnerSet, "
        "EphemeralRunner, AutoscalingListener) with --auto-scaling-runner-set-only, else the "
        "legacy actions.summerwind.dev controllers (Runner, RunnerReplicaSet, "
        "RunnerDeployment, RunnerSet, runner pods, HorizontalRunnerAutoscaler).",
    )
    add = p.add_argument
    add(
        "--auto-scaling-runner-set-only",
        action="store_true",
        help="Run scale set mode (actions.github.com). Without it: legacy mode.",
    )
    add(
        "--metrics-addr",
        default="0",
        help='Metrics bind address, e.g. ":8080"; "0" (the default, as ARC\'s chart) disables.',
    )
    add(
        "--health-probe-bind-address",
        default="",
        help="Bind address of /healthz and /readyz; empty disables.",
    )
    add(
        "--enable-leader-election",
        action="store_true",
        help="Run reconcilers only on the holder of a Lease.",
    )
    add("--leader-election-id", default="actions-runner-controller", help="The Lease name.")
    add(
        "--leader-election-namespace",
        default="",
        help="Namespace of the Lease (default: the controller's namespace).",
    )
    add(
        "--log-level",
        default="debug",
        choices=sorted(LOG_LEVELS),
        help="Also written into listener configs.",
    )
    add(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="Also written into listener configs.",
    )
    add(
        "--watch-namespace",
        default="",
        help="Reconcile AutoscalingRunnerSets of this namespace only.",
    )
    add("--watch-single-namespace", default="", help="Same as --watch-namespace (ARC name).")
    add(
        "--exclude-label-propagation-prefix",
        action="append",
        default=[],
        help="Label prefix not copied onto child objects (repeatable).",
    )
    add(
        "--auto-scaler-image-pull-secrets",
        action="append",
        default=[],
        help="imagePullSecrets of listener pods (repeatable or comma-separated).",
    )
    add(
        "--allow-unrestricted-listener-template",
        action="store_true",
        help="Merge any listenerTemplate into listener pods, as ARC does (extra containers, "
        "volumes, host namespaces, security contexts). Listener pods run in the controller's "
        "namespace: single-tenant clusters only (docs/security.md).",
    )
    add(
        "--runner-max-concurrent-reconciles",
        type=int,
        default=32,
        help="Workers of the EphemeralRunner controller (ARC: 2; reconciles are async I/O).",
    )
    add(
        "--runner-registration-sync-interval",
        type=float,
        default=60.0,
        help="Seconds between reconciles of each scale set's runners against GitHub's "
        "runner list (replaces runners whose registration was deleted, removes orphan "
        "registrations; one list call per scale set). 0 turns it off.",
    )
    add(
        "--runner-registration-grace",
        type=float,
        default=120.0,
        help="Seconds a runner must be old (a registration seen orphaned) before the "
        "registration reconcile repairs it, so a registration in flight is never mistaken.",
    )
    add(
        "--runner-hang-timeout",
        type=float,
        default=300.0,
        help="Seconds a runner's pod may keep running after its job completed and GitHub "
        "dropped its registration before it is deleted (a hung runner process, checked by "
        "the registration reconcile). 0 turns it off.",
    )
    add(
        "--runner-startup-timeout",
        type=float,
        default=600.0,
        help="Seconds a runner that has not come online yet (pod not running) is spared by "
        "scale down, so the job it was made for is not cancelled while its pod waits for a "
        "node; after it a stuck runner may be scaled down.",
    )
    add(
        "--node-loss-timeout",
        type=float,
        default=60.0,
        help="Seconds a node may be not Ready (or gone) before its runner and listener "
        "pods are declared dead and replaced; 0 turns node loss handling off (always off "
        "with --watch-single-namespace: Nodes are cluster-scoped).",
    )
    add(
        "--listener-metrics-addr",
        default=":8080",
        help='Metrics address written into listener configs; "0" disables.',
    )
    add("--listener-metrics-endpoint", default="/metrics", help="Listener metrics path.")
    add(
        "--listener-mode",
        default="InProcess",
        choices=["InProcess", "Pod"],
        help="InProcess (default): every scale set's listener runs as a task of the elected "
        "controller, and a standby replica takes over their sessions; Pod: one listener pod "
        "per scale set in the controller's namespace, as ARC does.",
    )
    add(
        "--k8s-client-rate-limiter-qps",
        type=float,
        default=300.0,
        help="Client-side QPS (ARC: 20). gharc makes about 21 calls per job, so 300 allows "
        "~14 jobs/s; API priority and fairness protects the server.",
    )
    add("--k8s-client-rate-limiter-burst", type=int, default=600, help="Client-side burst.")
    add("--kubeconfig", default=None, help="Kubeconfig path (default: in-cluster or ~/.kube).")
    legacy = p.add_argument_group("legacy mode (without --auto-scaling-runner-set-only)")
    lg = legacy.add_argument
    lg("--github-token", default="", help="Personal access token (env GITHUB_TOKEN).")
    lg("--github-app-id", default="", help="GitHub App ID (env GITHUB_APP_ID).")
    lg(
        "--github-app-installation-id",
        default="",
        help="GitHub App installation ID (env GITHUB_APP_INSTALLATION_ID).",
    )
    lg(
        "--github-app-private-key",
        default="",
        help="GitHub App private key: a PEM file path or the PEM text (env "
        "GITHUB_APP_PRIVATE_KEY).",
    )
    lg(
        "--github-url",
        default="",
        help=f"GitHub API URL (env GITHUB_URL; default {DEFAULT_GITHUB_API_URL}).",
    )
    lg(
        "--github-enterprise-url",
        default="",
        help="GitHub Enterprise Server URL, e.g. https://ghes.example.com (env "
        "GITHUB_ENTERPRISE_URL); wins over --github-url.",
    )
    lg(
        "--runner-github-url",
        default="",
        help="GITHUB_URL given to runner pods (default: the GitHub server URL).",
    )
    lg("--runner-image", default="summerwind/actions-runner:latest", help="Runner image.")
    lg(
        "--runner-image-pull-secret",
        action="append",
        default=[],
        help="imagePullSecret added to runner pods without any (repeatable).",
    )
    lg("--docker-image", default="docker:dind", help="Image of the docker sidecar.")
    lg("--docker-gid", default="1001", help="Default DOCKER_GROUP_GID of runner containers.")
    lg("--docker-registry-mirror", default="", help="Registry mirror for the docker sidecar.")
    lg(
        "--runner-status-update-hook",
        action="store_true",
        help="Let runners report their status into Runner objects.",
    )
    lg(
        "--common-runner-labels",
        action="append",
        default=[],
        help="Runner labels added to every RunnerDeployment/RunnerSet (comma-separated).",
    )
    lg(
        "--default-scale-down-delay",
        default="10m",
        help="Go duration an HRA waits after a scale out before scaling down.",
    )
    lg(
        "--sync-period",
        default="1m",
        help="Go duration between re-evaluations of each HorizontalRunnerAutoscaler.",
    )
    # Accepted so ARC's chart arguments do not fail; no effect in gharc.
    for flag in (
        "--workqueue-rate-limiter",
        "--pprof-addr",
        "--port",
        "--update-strategy",
    ):
        add(flag, default=None, help=argparse.SUPPRESS)
    return p


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> ControllerArgs:
    """argv (without the program name) + environment -> :class:`ControllerArgs`."""
    env = os.environ if environ is None else environ
    ns = build_parser().parse_args(list(argv))
    controller_ns = env.get(c.ENV_CONTROLLER_NAMESPACE, "").strip()
    scaleset_mode = bool(ns.auto_scaling_runner_set_only)
    if scaleset_mode and not controller_ns:
        raise UsageError(
            f"{c.ENV_CONTROLLER_NAMESPACE} is not set: the controller must know its own "
            "namespace, where listeners run. In a pod, set it from the downward API "
            "(fieldRef: metadata.namespace)."
        )
    legacy_kw = {} if scaleset_mode else _legacy_fields(ns, env, controller_ns)
    if ns.runner_startup_timeout < 0:
        raise UsageError("--runner-startup-timeout must not be negative")
    if ns.node_loss_timeout < 0:
        raise UsageError("--node-loss-timeout must not be negative")
    if ns.runner_max_concurrent_reconciles < 1:
        raise UsageError("--runner-max-concurrent-reconciles must be at least 1")
    defaults = ControllerArgs(controller_namespace=controller_ns)
    entrypoint = env.get(ENV_LISTENER_ENTRYPOINT, "").strip()
    pull_secrets = tuple(
        s.strip()
        for item in ns.auto_scaler_image_pull_secrets
        for s in item.split(",")
        if s.strip()
    )
    return ControllerArgs(
        controller_namespace=controller_ns,
        listener_image=env.get(ENV_CONTROLLER_IMAGE, "").strip() or defaults.listener_image,
        listener_command=tuple(shlex.split(entrypoint))
        if entrypoint
        else defaults.listener_command,
        metrics_addr=ns.metrics_addr,
        health_probe_bind_address=ns.health_probe_bind_address,
        enable_leader_election=ns.enable_leader_election,
        leader_election_id=ns.leader_election_id,
        leader_election_namespace=ns.leader_election_namespace or controller_ns,
        auto_scaling_runner_set_only=scaleset_mode,
        log_level=ns.log_level,
        log_format=ns.log_format,
        watch_namespace=ns.watch_single_namespace or ns.watch_namespace,
        exclude_label_propagation_prefixes=tuple(ns.exclude_label_propagation_prefix),
        auto_scaler_image_pull_secrets=pull_secrets,
        allow_unrestricted_listener_template=ns.allow_unrestricted_listener_template,
        runner_max_concurrent_reconciles=ns.runner_max_concurrent_reconciles,
        runner_registration_sync_interval=ns.runner_registration_sync_interval,
        runner_registration_grace=ns.runner_registration_grace,
        runner_hang_timeout=ns.runner_hang_timeout,
        runner_startup_timeout=ns.runner_startup_timeout,
        node_loss_timeout=ns.node_loss_timeout,
        listener_metrics_addr=ns.listener_metrics_addr,
        listener_metrics_endpoint=ns.listener_metrics_endpoint,
        k8s_client_qps=ns.k8s_client_rate_limiter_qps,
        k8s_client_burst=ns.k8s_client_rate_limiter_burst,
        kubeconfig=ns.kubeconfig,
        build_version=env.get(ENV_BUILD_VERSION, "").strip() or "dev",
        listener_mode=ns.listener_mode,
        **legacy_kw,
    )


def _duration(flag: str, text: str) -> float:
    try:
        seconds = parse_go_duration(text).total_seconds()
    except ValueError:
        raise UsageError(
            f"{flag} {text!r} is not a duration: use Go's form, e.g. 30s, 1m or 1h30m"
        ) from None
    if seconds < 0:
        raise UsageError(f"{flag} must not be negative")
    return seconds


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(s.strip() for item in values for s in item.split(",") if s.strip())


def _legacy_fields(
    ns: argparse.Namespace, env: Mapping[str, str], controller_ns: str
) -> dict[str, Any]:
    """Legacy-mode fields of :class:`ControllerArgs`, validated (credentials included) so
    a mistake stops the process at start with a message, not at the first reconcile."""
    values: dict[str, Any] = {}
    for var, attr in GITHUB_ENV.items():
        value = getattr(ns, attr) or env.get(var, "")
        values[attr] = value if attr == "github_app_private_key" else value.strip()
    sync_period = _duration("--sync-period", ns.sync_period)
    if sync_period <= 0:
        raise UsageError("--sync-period must be positive")
    values.update(
        runner_github_url=ns.runner_github_url.strip(),
        runner_image=ns.runner_image,
        runner_image_pull_secrets=_split(ns.runner_image_pull_secret),
        docker_image=ns.docker_image,
        docker_gid=str(ns.docker_gid),
        docker_registry_mirror=ns.docker_registry_mirror,
        runner_status_update_hook=ns.runner_status_update_hook,
        common_runner_labels=_split(ns.common_runner_labels),
        default_scale_down_delay=_duration(
            "--default-scale-down-delay", ns.default_scale_down_delay
        ),
        sync_period=sync_period,
    )
    if ns.enable_leader_election and not (ns.leader_election_namespace or controller_ns):
        raise UsageError(
            "--enable-leader-election needs a namespace for its Lease: pass "
            f"--leader-election-namespace or set {c.ENV_CONTROLLER_NAMESPACE}"
        )
    probe = ControllerArgs(controller_namespace=controller_ns, **values)
    try:
        legacy_credentials(probe)
    except UsageError as err:
        creds = ("github_token", "github_app_id", "github_app_installation_id")
        nothing_set = not any(values[k] for k in (*creds, "github_app_private_key"))
        if nothing_set and not controller_ns:
            # Most likely scale set mode was meant: say how to get it.
            raise UsageError(
                f"{err}. (Without --auto-scaling-runner-set-only gharc controller runs legacy "
                "mode. For scale set mode pass --auto-scaling-runner-set-only; "
                f"{c.ENV_CONTROLLER_NAMESPACE} is not set, which that mode needs too.)"
            ) from None
        raise
    legacy_server_url(probe)
    return values


def legacy_credentials(args: ControllerArgs) -> Any:
    """The controller-wide GitHub credentials of legacy mode (legacy.md 6.1).

    A token wins over the App triple (ARC's precedence). A partial App triple or no
    credentials at all is a :class:`UsageError` naming what is missing: ARC's legacy
    controllers cannot register a runner without them, so starting would only fail later.
    """
    from gharc.github.auth import CredentialsError, GitHubApp, PersonalAccessToken

    if args.github_token:
        return PersonalAccessToken(args.github_token)
    app = {
        "--github-app-id (GITHUB_APP_ID)": args.github_app_id,
        "--github-app-installation-id (GITHUB_APP_INSTALLATION_ID)": (
            args.github_app_installation_id
        ),
        "--github-app-private-key (GITHUB_APP_PRIVATE_KEY)": args.github_app_private_key,
    }
    given = [k for k, v in app.items() if v]
    if not given:
        raise UsageError(
            "legacy mode needs GitHub credentials: set --github-token (GITHUB_TOKEN) or "
            "--github-app-id, --github-app-installation-id and --github-app-private-key "
            "(GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID, GITHUB_APP_PRIVATE_KEY)"
        )
    missing = [k for k, v in app.items() if not v]
    if missing:
        raise UsageError(
            f"incomplete GitHub App credentials: {', '.join(missing)} not set "
            f"({', '.join(given)} given)"
        )
    key = args.github_app_private_key
    path = Path(key)
    if "\n" not in key and len(key) < 4096:
        try:
            if path.is_file():
                key = path.read_text(encoding="utf-8")
        except OSError as err:
            raise UsageError(f"--github-app-private-key: cannot read {key}: {err}") from None
    try:
        return GitHubApp(args.github_app_id, args.github_app_installation_id, key)
    except CredentialsError as err:
        hint = "" if "PRIVATE KEY" in key else " (neither an existing file nor PEM text)"
        raise UsageError(f"GitHub App credentials: {err}{hint}") from None


def legacy_server_url(args: ControllerArgs) -> str:
    """The GitHub server URL the legacy scopes' config URLs start from (legacy.md 6.1):
    ``--github-enterprise-url``, else the web host of the ``--github-url`` API URL."""
    if args.github_enterprise_url:
        flag, raw = "--github-enterprise-url", args.github_enterprise_url
        # A blank flag is reported below, not read as "no enterprise URL": it was given.
        url = server_url(enterprise_url=raw) if raw.strip() else ""
    else:
        flag, raw = "--github-url", args.github_url or DEFAULT_GITHUB_API_URL
        url = server_url(api_url=raw)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{flag} {raw!r} is not an http(s) URL")
    return url


def legacy_options(args: ControllerArgs) -> Any:
    """The :class:`LegacyOptions` the legacy reconcilers share, from the parsed arguments."""
    from gharc.controllers.legacy.options import LegacyOptions

    options = LegacyOptions(
        github_url=legacy_server_url(args),
        runner_github_url=args.runner_github_url or None,
        credentials=legacy_credentials(args),
        runner_image=args.runner_image,
        runner_image_pull_secrets=list(args.runner_image_pull_secrets),
        docker_image=args.docker_image,
        docker_gid=args.docker_gid,
        docker_registry_mirror=args.docker_registry_mirror,
        runner_status_update_hook=args.runner_status_update_hook,
        common_runner_labels=list(args.common_runner_labels),
        version=f"gharc-{args.build_version}",
    )
    return dataclasses.replace(options, **args.option_overrides)


def scaleset_options(args: ControllerArgs) -> Any:
    """The :class:`ScaleSetOptions` the reconcilers share, from the parsed arguments."""
    from gharc.controllers.scaleset.options import ScaleSetOptions

    options = ScaleSetOptions(
        controller_namespace=args.controller_namespace,
        listener_image=args.listener_image,
        listener_command=args.listener_command,
        listener_image_pull_secrets=args.auto_scaler_image_pull_secrets,
        allow_unrestricted_listener_template=args.allow_unrestricted_listener_template,
        listener_metrics_addr=args.listener_metrics_addr,
        listener_metrics_endpoint=args.listener_metrics_endpoint,
        log_level=args.log_level,
        log_format=args.log_format,
        exclude_label_propagation_prefixes=args.exclude_label_propagation_prefixes,
        runner_max_concurrent_reconciles=args.runner_max_concurrent_reconciles,
        registration_sync_interval=args.runner_registration_sync_interval,
        registration_sync_grace=args.runner_registration_grace,
        runner_hang_timeout=args.runner_hang_timeout,
        runner_startup_timeout=args.runner_startup_timeout,
        # Nodes are cluster-scoped: a single-namespace controller has no rights to watch them.
        node_loss_timeout=0.0 if args.watch_namespace else args.node_loss_timeout,
        build_version=args.build_version,
        listener_mode=args.listener_mode,
    )
    return dataclasses.replace(options, **args.option_overrides)


async def run_controller(
    args: ControllerArgs,
    *,
    on_manager: Callable[[Any], None] | None = None,
    handle_signals: bool = True,
    registry: Any = None,
    github_transport: Any = None,
) -> None:
    """Run the controllers of ``args``' mode until SIGTERM/SIGINT or ``manager.stop()``.

    ``on_manager`` receives the :class:`~gharc.kube.manager.Manager` before it runs (tests
    stop it with ``manager.stop()``); ``registry`` is the Prometheus registry for the
    manager and the controller gauges (default: the process-wide one);
    ``github_transport`` is an optional httpx transport for GitHub calls.
    """
    if args.legacy:
        await run_legacy_controller(
            args,
            on_manager=on_manager,
            handle_signals=handle_signals,
            registry=registry,
            github_transport=github_transport,
        )
        return
    from gharc.controllers.scaleset.cacheselectors import cache_selectors, cache_transforms
    from gharc.controllers.scaleset.credentials import ClientResolver
    from gharc.controllers.scaleset.metrics import ControllerMetrics
    from gharc.controllers.scaleset.options import LISTENER_MODE_IN_PROCESS
    from gharc.controllers.scaleset.setup import setup_scaleset_controllers
    from gharc.github.breaker import BreakerRegistry
    from gharc.listener.host import ListenerHost

    options = scaleset_options(args)
    async with _runtime(args, github_transport) as (kube, pool, recorder):
        # ARC's --watch-single-namespace: cache only the runners' namespace and our own
        # (where listeners live), so namespaced Roles are enough RBAC.
        scopes = (args.watch_namespace, args.controller_namespace) if args.watch_namespace else ()
        manager = _manager(
            args,
            kube,
            registry=registry,
            handle_signals=handle_signals,
            election_namespace=args.leader_election_namespace or args.controller_namespace,
            namespaces=scopes,
            label_selectors=cache_selectors(),
            transforms=cache_transforms(),
        )
        metrics = ControllerMetrics(manager.registry)
        with contextlib.suppress(ValueError):  # already registered (one registry per process)
            manager.registry.register(BreakerRegistry.process())
        host = None
        if options.listener_mode == LISTENER_MODE_IN_PROCESS:
            host = ListenerHost(
                kube.for_caller("listener"),
                identity=socket.gethostname() or "gharc-controller",
                ladder=options.listener_failure_backoff,
            )
        controllers = setup_scaleset_controllers(
            manager, options, ClientResolver(kube, pool), metrics, recorder, host=host
        )
        if args.watch_namespace and args.watch_namespace != args.controller_namespace:
            # The cache also holds the controller's namespace (listeners live there); an
            # AutoscalingRunnerSet there is not ours to reconcile.
            ars_controller = controllers[0]
            ars_controller.reconciler = _NamespaceFilter(
                ars_controller.reconciler, args.watch_namespace
            )
        if on_manager is not None:
            on_manager(manager)
        log.info(
            "gharc controller starting: namespace %s, listeners %s (image %s), leader election %s",
            args.controller_namespace,
            args.listener_mode,
            args.listener_image,
            args.enable_leader_election,
        )
        await manager.run()


@contextlib.asynccontextmanager
async def _runtime(
    args: ControllerArgs, github_transport: Any
) -> AsyncIterator[tuple[Any, Any, Any]]:
    """The Kubernetes client, GitHub client pool and event recorder of either mode."""
    from gharc.github.breaker import BreakerRegistry
    from gharc.github.pool import ClientPool
    from gharc.github.transport import CONTROLLER_RETRY
    from gharc.kube.client import KubeClient
    from gharc.kube.events import EventRecorder

    kube = await KubeClient.from_config(
        kubeconfig=args.kubeconfig,
        qps=args.k8s_client_qps or None,
        burst=args.k8s_client_burst,
        field_manager="gharc-controller",
    )
    pool = ClientPool(
        user_agent=f"{c.USER_AGENT_PREFIX}gharc-{args.build_version}",
        transport=github_transport,
        retry=CONTROLLER_RETRY,
        breakers=BreakerRegistry.process(),  # shared with the in-process listeners
    )
    recorder = EventRecorder(kube, component="gharc-controller")
    try:
        yield kube, pool, recorder
    finally:
        await recorder.close()
        await pool.aclose()
        await kube.close()


def _manager(
    args: ControllerArgs,
    kube: Any,
    *,
    registry: Any,
    handle_signals: bool,
    election_namespace: str,
    **cache: Any,
) -> Any:
    """The Manager for ``args``: metrics and health addresses, optional leader election."""
    from gharc.kube.leaderelection import LeaderElectionConfig
    from gharc.kube.manager import Manager

    extra: dict[str, Any] = {"registry": registry} if registry is not None else {}
    return Manager(
        kube,
        metrics_address=None if args.metrics_addr in ("", "0") else args.metrics_addr,
        health_address=args.health_probe_bind_address or None,
        leader_election=LeaderElectionConfig(args.leader_election_id, election_namespace)
        if args.enable_leader_election
        else None,
        handle_signals=handle_signals,
        **cache,
        **extra,
    )


async def run_legacy_controller(
    args: ControllerArgs,
    *,
    on_manager: Callable[[Any], None] | None = None,
    handle_signals: bool = True,
    registry: Any = None,
    github_transport: Any = None,
) -> None:
    """Legacy mode: the six ``actions.summerwind.dev`` controllers on one manager.

    The manager caches runner pods only (label ``actions-runner``), shared by the runner
    controllers and the HRA; Secrets are read from the API server (never cached, as ARC).
    Runner and HRA controllers share one GitHub client resolver and pool, so a scope's
    List Runners responses are cached once for both.
    """
    from gharc.api.legacy import constants as lc
    from gharc.controllers.legacy import hra
    from gharc.controllers.legacy.hra_prometheus import HRAMetrics
    from gharc.controllers.legacy.metrics import LegacyMetrics
    from gharc.controllers.legacy.setup import setup_legacy_controllers
    from gharc.kube.resources import PODS

    options = legacy_options(args)
    async with _runtime(args, github_transport) as (kube, pool, recorder):
        manager = _manager(
            args,
            kube,
            registry=registry,
            handle_signals=handle_signals,
            election_namespace=args.leader_election_namespace or args.controller_namespace,
            namespace=args.watch_namespace or None,
            label_selectors={PODS: lc.LABEL_RUNNER},
        )
        controllers = setup_legacy_controllers(
            manager,
            options,
            pool,
            kube=kube,
            recorder=recorder,
            metrics=LegacyMetrics(manager.registry),
        )
        hra.setup(
            manager,
            kube,
            controllers.github,
            recorder=recorder,
            metrics=HRAMetrics(manager.registry),
            default_scale_down_delay=args.default_scale_down_delay,
            sync_period=args.sync_period,
        )
        if on_manager is not None:
            on_manager(manager)
        log.info(
            "gharc controller starting in legacy mode: GitHub %s, namespace %s, runner image %s",
            options.github_url,
            args.watch_namespace or "(all)",
            options.runner_image,
        )
        await manager.run()


class _NamespaceFilter:
    """Wraps the ARS reconciler so only ``--watch-namespace`` objects are reconciled."""

    def __init__(self, inner: Any, namespace: str) -> None:
        self.inner = inner
        self.namespace = namespace

    async def reconcile(self, request: Any) -> Any:
        if request.namespace != self.namespace:
            return None
        return await self.inner.reconcile(request)


def setup_logging(args: ControllerArgs) -> None:
    from gharc.kube.logging import setup_logging as kube_setup_logging

    kube_setup_logging(
        level=LOG_LEVELS.get(args.log_level, logging.INFO),
        format="json" if args.log_format == "json" else "console",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gharc controller``; returns the process exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"gharc controller: error: {err}", file=sys.stderr)
        return 2
    setup_logging(args)
    try:
        asyncio.run(run_controller(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        log.exception("gharc controller stopped with an error: %s", err)
        return 1
    return 0
