"""``gharc controller``: the controller manager (ARC ``main.go``), in one of two modes.

- **Scale set mode** (``--auto-scaling-runner-set-only``, what the controller chart passes):
  the AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner and AutoscalingListener
  controllers of ``actions.github.com``.
- **Legacy mode** (without that flag, as in ARC): the ``actions.summerwind.dev`` controllers
  runner, runnerreplicaset, runnerdeployment, runnerset, runnerpod and
  horizontalrunnerautoscaler (legacy.md 7), with controller-wide GitHub credentials from
  ``--github-token`` or the ``--github-app-*`` triple (env ``GITHUB_*``).

Every flag and env var is declared once, in :mod:`gharc.controllers.settings` (ARC's names
and defaults, so the charts' and ARC users' arguments work unchanged); docs/configuration.md
carries the table generated from it. This module holds the rules across settings:
:func:`parse_args` turns argv + the environment into settings (or raises
:class:`UsageError` with a message a human can act on), :func:`scaleset_options` and
:func:`legacy_options` hand them to the reconcilers, and :func:`run_controller` runs a
manager for them until SIGTERM. Tests and the demo call :func:`run_controller` in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gharc.api.scaleset import constants as c
from gharc.controllers.settings import IGNORED_ARC_FLAGS, LEGACY, ControllerSettings
from gharc.github.config import server_url
from gharc.kube.logging import configure_logging
from gharc.kube.serving import serving_address
from gharc.settings import declare
from gharc.settings.common import DEFAULT_GITHUB_API_URL, GITHUB
from gharc.settings.credentials import github_credentials
from gharc.settings.declare import UsageError

if TYPE_CHECKING:  # the modes' modules are imported when a mode runs, not with the CLI
    from prometheus_client import CollectorRegistry

    from gharc.controllers.legacy.options import LegacyOptions
    from gharc.controllers.scaleset.options import ScaleSetOptions
    from gharc.github.pool import ClientPool
    from gharc.kube.client import KubeClient
    from gharc.kube.controller import Controller
    from gharc.kube.events import EventRecorder
    from gharc.kube.manager import Manager
    from gharc.kube.shardfence import ShardFences
    from gharc.listener.host import ListenerHost

__all__ = [
    "ControllerArgs",
    "build_parser",
    "legacy_credentials",
    "legacy_options",
    "legacy_server_url",
    "main",
    "parse_args",
    "run_controller",
    "scaleset_options",
]

log = logging.getLogger("gharc.controller")

#: The name callers and tests have always used for the controller's settings.
ControllerArgs = ControllerSettings


def build_parser() -> argparse.ArgumentParser:
    """The ``gharc controller`` parser, derived from :class:`ControllerSettings`."""
    return declare.build_parser(
        ControllerSettings,
        prog="gharc controller",
        description="Run the scale set controllers (AutoscalingRunnerSet, EphemeralRunnerSet, "
        "EphemeralRunner, AutoscalingListener) with --auto-scaling-runner-set-only, else the "
        "legacy actions.summerwind.dev controllers (Runner, RunnerReplicaSet, "
        "RunnerDeployment, RunnerSet, runner pods, HorizontalRunnerAutoscaler).",
        ignored=IGNORED_ARC_FLAGS,
    )


def _legacy_only(spec: declare.Setting) -> bool:
    return spec.group in (LEGACY, GITHUB)


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> ControllerSettings:
    """argv (without the program name) + environment -> :class:`ControllerSettings`.

    Scale set mode reads neither the legacy flags nor the ``GITHUB_*`` env; legacy mode
    checks its credentials and URLs here, so a mistake stops the process at start with a
    message, not at the first reconcile.
    """
    env = os.environ if environ is None else environ
    ns = build_parser().parse_args(list(argv))
    scaleset_mode = bool(ns.auto_scaling_runner_set_only)
    values = declare.read(ControllerSettings, ns, env, skip=_legacy_only if scaleset_mode else None)
    args = ControllerSettings(**values)
    if scaleset_mode and not args.controller_namespace:
        raise UsageError(
            f"{c.ENV_CONTROLLER_NAMESPACE} is not set: the controller must know its own "
            "namespace, where listeners run. In a pod, set it from the downward API "
            "(fieldRef: metadata.namespace)."
        )
    args.leader_election_namespace = args.leader_election_namespace or args.controller_namespace
    if not scaleset_mode:
        _check_legacy(args)
    return args


def _check_legacy(args: ControllerSettings) -> None:
    """Legacy mode's rules across settings: a Lease namespace, credentials, URLs; no shards."""
    if args.shards > 1:
        raise UsageError(
            "--shards applies to scale set mode (--auto-scaling-runner-set-only) only; legacy "
            "mode runs on one replica (--enable-leader-election)"
        )
    if args.enable_leader_election and not args.leader_election_namespace:
        raise UsageError(
            "--enable-leader-election needs a namespace for its Lease: pass "
            f"--leader-election-namespace or set {c.ENV_CONTROLLER_NAMESPACE}"
        )
    try:
        legacy_credentials(args)
    except UsageError as err:
        creds = ("github_token", "github_app_id", "github_app_installation_id")
        nothing_set = not any(getattr(args, k) for k in (*creds, "github_app_private_key"))
        if nothing_set and not args.controller_namespace:
            # Most likely scale set mode was meant: say how to get it.
            raise UsageError(
                f"{err}. (Without --auto-scaling-runner-set-only gharc controller runs legacy "
                "mode. For scale set mode pass --auto-scaling-runner-set-only; "
                f"{c.ENV_CONTROLLER_NAMESPACE} is not set, which that mode needs too.)"
            ) from None
        raise
    legacy_server_url(args)


def legacy_credentials(args: ControllerSettings) -> Any:
    """The controller-wide GitHub credentials of legacy mode (legacy.md 6.1): a token wins
    over the App triple (ARC's precedence); none or a partial triple is a UsageError."""
    return github_credentials(args, required=True)


def legacy_server_url(args: ControllerSettings) -> str:
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


def legacy_options(args: ControllerSettings) -> LegacyOptions:
    """The :class:`LegacyOptions` the legacy reconcilers share, from the parsed arguments."""
    from gharc.controllers.legacy.options import LegacyOptions

    options = LegacyOptions(
        **{
            **declare.options_fields(args, LegacyOptions),
            # Derived, not copied: the settings of these names mean something else.
            "github_url": legacy_server_url(args),
            "runner_github_url": args.runner_github_url or None,
            "credentials": legacy_credentials(args),
            "version": f"gharc-{args.build_version}",
        }
    )
    return dataclasses.replace(options, **args.option_overrides)


def scaleset_options(args: ControllerSettings) -> ScaleSetOptions:
    """The :class:`ScaleSetOptions` the reconcilers share, from the parsed arguments."""
    from gharc.controllers.scaleset.options import ScaleSetOptions

    fields = declare.options_fields(args, ScaleSetOptions)
    if args.watch_namespace:
        # Nodes are cluster-scoped: a single-namespace controller has no rights to watch them.
        fields["node_loss_timeout"] = 0.0
    options = ScaleSetOptions(**fields)
    return dataclasses.replace(options, **args.option_overrides)


async def run_controller(
    args: ControllerSettings,
    *,
    on_manager: Callable[[Manager], None] | None = None,
    handle_signals: bool = True,
    registry: CollectorRegistry | None = None,
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
    from gharc.controllers.loopstall import StallReporter
    from gharc.controllers.scaleset.cacheselectors import cache_selectors, cache_transforms
    from gharc.controllers.scaleset.credentials import ClientResolver
    from gharc.controllers.scaleset.deps import ScaleSetDeps
    from gharc.controllers.scaleset.metrics import ControllerMetrics
    from gharc.controllers.scaleset.setup import setup_scaleset_controllers
    from gharc.github.breaker import BreakerRegistry
    from gharc.listener.host import ListenerHost

    options = scaleset_options(args)
    async with _runtime(args, github_transport) as (kube, pool, recorder):
        if args.shards > 1:
            from gharc.kube.shardfence import ShardFences

            fences = ShardFences(args.shards)
            kube.shard_fences = fences  # before for_caller views share it
        # ARC's --watch-single-namespace: cache only the runners' namespace and our own
        # (where listeners live), so namespaced Roles are enough RBAC.
        scopes = (args.watch_namespace, args.controller_namespace) if args.watch_namespace else ()
        manager = _manager(
            args,
            kube,
            registry=registry,
            handle_signals=handle_signals,
            namespaces=scopes,
            label_selectors=cache_selectors(),
            transforms=cache_transforms(),
        )
        metrics = ControllerMetrics(manager.registry)
        with contextlib.suppress(ValueError):  # already registered (one registry per process)
            manager.registry.register(BreakerRegistry.process())
        host = None
        if options.listener_in_process:
            host = ListenerHost(
                kube.for_caller("listener"),
                identity=_host_identity(args),
                ladder=options.listener_failure_backoff,
                release_on_stop=options.release_sessions_on_stop,
                release_allowed=lambda: not manager.leadership_lost,
            )
        # --watch-single-namespace: the cache also holds the controller's namespace
        # (listeners live there); an AutoscalingRunnerSet there is not ours to reconcile.
        watch = args.watch_namespace
        resolver = ClientResolver(kube, pool)
        deps = ScaleSetDeps(
            options,
            resolver,
            metrics=metrics,
            recorder=recorder,
            host=host,
            registry=manager.registry,
            watch_namespace=watch if watch and watch != args.controller_namespace else None,
        )
        controllers = setup_scaleset_controllers(manager, deps)
        if args.shards > 1:
            _add_sharding(args, manager, kube, host, fences)
        manager.loop_lag.on_stall = StallReporter(manager.cache, recorder)
        if options.release_sessions_on_stop:
            _add_handoff(manager, kube, recorder, host, controllers)
        if on_manager is not None:
            on_manager(manager)
        log.info(
            "gharc controller starting: namespace %s, listeners %s (image %s), leader election %s",
            args.controller_namespace,
            args.listener_mode,
            args.listener_image,
            args.enable_leader_election,
        )
        try:
            await manager.run()
        finally:
            await resolver.aclose()  # the Key Vault connections, if any were opened


def _host_identity(args: ControllerSettings) -> str:
    """The owner name of the listeners' message sessions: the pod's name. With shards, the
    replicas of one Deployment are told apart by ``POD_NAME`` (the downward API's) first."""
    if args.shards > 1 and os.environ.get("POD_NAME"):
        return os.environ["POD_NAME"]
    return socket.gethostname() or "gharc-controller"


def _add_sharding(
    args: ControllerSettings,
    manager: Manager,
    kube: KubeClient,
    host: ListenerHost | None,
    fences: ShardFences,
) -> None:
    """``--shards`` > 1: a shard keeper on every replica, and every controller (and the
    registration sweep) acting only for the scale sets of the shards it holds."""
    from gharc.controllers.scaleset.orphans import OrphanReconciler
    from gharc.controllers.scaleset.sharding import Sharding
    from gharc.kube.controller import Controller
    from gharc.kube.shards import ShardConfig, ShardKeeper

    keeper: ShardKeeper | None = None

    def owns(shard: int) -> bool:
        return keeper is not None and keeper.owns(shard)

    sharding = Sharding(owns, args.shards, host)
    runnables = manager.runnables
    sharding.install(manager.cache, {r.name: r for r in runnables if isinstance(r, Controller)})
    for runnable in runnables:
        if isinstance(runnable, OrphanReconciler):
            runnable.shard_for = sharding.runner_set_shard
    keeper = ShardKeeper(
        kube,
        ShardConfig(
            args.leader_election_id,
            args.leader_election_namespace or args.controller_namespace,
            args.shards,
        ),
        fences,
        on_gained=sharding.gained,
        on_lost=sharding.lost,
        before_release=sharding.before_release,
    )
    manager.add(keeper)


def _add_handoff(
    manager: Manager,
    kube: KubeClient,
    recorder: EventRecorder,
    host: ListenerHost | None,
    controllers: list[Controller],
) -> None:
    """``--release-sessions-on-stop``: the host deletes its sessions on stop, and a runnable
    added after it (so stopped after it) removes gharc's marks from ARC's objects."""
    from gharc.controllers.scaleset.handoff import Handoff

    handoff = Handoff(
        kube,
        manager.cache,
        recorder,
        sweep_sessions=host is not None,
        release_allowed=lambda: not manager.leadership_lost,
        after=lambda: manager.wait_stopped(controllers, 10.0),
    )
    manager.add(handoff)
    if host is not None:
        host.on_released = handoff.session_released


@contextlib.asynccontextmanager
async def _runtime(
    args: ControllerSettings, github_transport: Any
) -> AsyncIterator[tuple[KubeClient, ClientPool, EventRecorder]]:
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
        max_in_flight_per_namespace=args.k8s_client_max_in_flight_per_namespace,
        backlog_rest=args.k8s_client_backlog_rest,
        field_manager="gharc-controller",
    )
    for own in {args.controller_namespace, args.leader_election_namespace}:
        kube.exempt_from_in_flight_limit(own or "")
    pool = ClientPool(
        user_agent=f"{c.USER_AGENT_PREFIX}gharc-{args.build_version}",
        transport=github_transport,
        retry=CONTROLLER_RETRY,
        breakers=BreakerRegistry.process(),  # shared with the in-process listeners
        write_gate=kube.write_time_left,  # no runner registered after the Lease is lost
    )
    recorder = EventRecorder(kube, component="gharc-controller")
    try:
        yield kube, pool, recorder
    finally:
        await recorder.close()
        await pool.aclose()
        await kube.close()


def _manager(
    args: ControllerSettings,
    kube: KubeClient,
    *,
    registry: CollectorRegistry | None,
    handle_signals: bool,
    **cache: Any,
) -> Manager:
    """The Manager for ``args``: metrics and health addresses, optional leader election.

    The Lease lives in ``--leader-election-namespace``, else the controller's namespace:
    decided here for both modes, as settings built without :func:`parse_args` (tests, the
    demo) have not had that default filled in."""
    from gharc.kube.leaderelection import LeaderElectionConfig
    from gharc.kube.manager import Manager

    extra: dict[str, Any] = {"registry": registry} if registry is not None else {}
    # With shards every replica runs everything; the shard Leases say for which sets.
    elect = args.enable_leader_election and (args.legacy or args.shards <= 1)
    return Manager(
        kube,
        metrics_address=serving_address(args.metrics_addr),
        health_address=args.health_probe_bind_address or None,
        leader_election=LeaderElectionConfig(
            args.leader_election_id,
            args.leader_election_namespace or args.controller_namespace,
        )
        if elect
        else None,
        handle_signals=handle_signals,
        freeze_heap=True,
        **cache,
        **extra,
    )


async def run_legacy_controller(
    args: ControllerSettings,
    *,
    on_manager: Callable[[Manager], None] | None = None,
    handle_signals: bool = True,
    registry: CollectorRegistry | None = None,
    github_transport: Any = None,
) -> None:
    """Legacy mode: the six ``actions.summerwind.dev`` controllers on one manager.

    The manager caches runner pods only (label ``actions-runner``), shared by the runner
    controllers and the HRA; Secrets are read from the API server (never cached, as ARC).
    Runner and HRA controllers share one GitHub client resolver and pool, so a scope's
    List Runners responses are cached once for both.
    """
    from gharc.api.legacy import constants as lc
    from gharc.controllers.legacy.deps import LegacyDeps
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
            namespace=args.watch_namespace or None,
            label_selectors={PODS: lc.LABEL_RUNNER},
        )
        deps = LegacyDeps.of(
            options,
            pool,
            kube,
            recorder=recorder,
            metrics=LegacyMetrics(manager.registry),
            hra_metrics=HRAMetrics(manager.registry),
        )
        setup_legacy_controllers(manager, deps)
        if on_manager is not None:
            on_manager(manager)
        log.info(
            "gharc controller starting in legacy mode: GitHub %s, namespace %s, runner image %s",
            options.github_url,
            args.watch_namespace or "(all)",
            options.runner_image,
        )
        await manager.run()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gharc controller``; returns the process exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"gharc controller: error: {err}", file=sys.stderr)
        return 2
    configure_logging(args)
    try:
        asyncio.run(run_controller(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        log.exception("gharc controller stopped with an error: %s", err)
        return 1
    return 0
