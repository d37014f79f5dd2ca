"""Settings shared by the four scale set reconcilers (what ARC passes as flags and env).

Why the defaults read ``ControllerSettings.<name>``: a field fed by a flag takes the flag's
default from its declaration in :mod:`gharc.controllers.settings`, so a default is written
once and ``ScaleSetOptions(controller_namespace=...)`` built directly (as tests do) behaves
as the process started without flags. Fields no flag feeds (backoff ladders, the user
agent) keep their defaults here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gharc.api.scaleset import constants as c
from gharc.controllers.settings import LISTENER_MODE_IN_PROCESS, ControllerSettings
from gharc.listener.restart_ladder import LISTENER_RESTART_LADDER

__all__ = [
    "FAILED_RUNNER_REPLACE_BACKOFF",
    "FAILED_RUNNER_WINDOW",
    "RUNNER_FAILURE_BACKOFF",
    "ScaleSetOptions",
]

#: Delays before re-creating a failed runner pod, indexed by failures so far (behaviours B2).
RUNNER_FAILURE_BACKOFF: tuple[float, ...] = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0)
#: Delays before the set replaces one more Failed runner, indexed by the Failed runners it
#: replaced in a row (each within ``FAILED_RUNNER_WINDOW`` of the previous one), then capped.
FAILED_RUNNER_REPLACE_BACKOFF: tuple[float, ...] = (0.0, 0.0, 30.0, 60.0, 120.0, 300.0)
#: A set that replaced no Failed runner for this long starts its backoff ladder again.
FAILED_RUNNER_WINDOW = 600.0


@dataclass
class ScaleSetOptions:
    controller_namespace: str
    """Where AutoscalingListeners and listener pods live (CONTROLLER_MANAGER_POD_NAMESPACE)."""
    listener_image: str = ControllerSettings.listener_image
    """The listener runs from the controller's own image (CONTROLLER_MANAGER_CONTAINER_IMAGE)."""
    listener_command: tuple[str, ...] = ControllerSettings.listener_command
    """Overridden by LISTENER_ENTRYPOINT, as in ARC."""
    listener_image_pull_secrets: tuple[str, ...] = ControllerSettings.auto_scaler_image_pull_secrets
    listener_metrics_addr: str = ControllerSettings.listener_metrics_addr
    listener_metrics_endpoint: str = ControllerSettings.listener_metrics_endpoint
    listener_metrics_max_buckets: int = ControllerSettings.listener_metrics_max_buckets
    """Bounds on a tenant's listenerMetrics, written into every listener's config (both
    modes obey them; see gharc/listener/metric_limits.py)."""
    listener_metrics_max_label_values: int = ControllerSettings.listener_metrics_max_label_values
    listener_metrics_max_series: int = ControllerSettings.listener_metrics_max_series
    log_level: str = ControllerSettings.log_level
    """``--log-level``: ARC's and the chart's default (``debug``), given to listeners."""
    log_format: str = ControllerSettings.log_format
    exclude_label_propagation_prefixes: tuple[str, ...] = (
        ControllerSettings.exclude_label_propagation_prefixes
    )
    runner_max_concurrent_reconciles: int = ControllerSettings.runner_max_concurrent_reconciles
    """Workers of the EphemeralRunner controller; ARC defaults to 2, which made runner
    creation the queue of a burst (2.6 s p50 from EphemeralRunner to pod at 5 jobs/s).
    A new runner's reconcile waits on three round trips (JIT config, secret, pod), so 8
    workers still queued a 400-runner burst for 30-45 s; 32 bring it to about 10 s."""
    runner_set_max_concurrent_reconciles: int = 4
    """Workers of the EphemeralRunnerSet controller (one key is never reconciled twice at
    once, so sets only run in parallel with other sets)."""
    runner_failure_backoff: tuple[float, ...] = RUNNER_FAILURE_BACKOFF
    runner_max_failures: int = 5
    failed_runner_replace_backoff: tuple[float, ...] = FAILED_RUNNER_REPLACE_BACKOFF
    """How fast an EphemeralRunnerSet deletes and replaces its Failed runners: a runner that
    keeps failing must not turn into a create/fail storm against GitHub and the API server."""
    runner_startup_timeout: float = ControllerSettings.runner_startup_timeout
    """``--runner-startup-timeout``: seconds a runner that has not come online yet (pod not
    running) is protected from scale down, so a job just assigned to it is not cancelled
    while its pod waits for a node (ARC #3581, #3516). After it, a stuck runner may go."""
    registration_sync_interval: float = ControllerSettings.runner_registration_sync_interval
    """``--runner-registration-sync-interval``: seconds between the reconciles of each scale
    set's EphemeralRunners against GitHub's runner list (one list call per GitHub scope
    each time, quiet sets every 10th time; ``orphans.py``), which replace runners whose
    registration GitHub deleted and remove registrations no runner holds (ARC #4396). 60 s
    replaces a zombie within about two minutes (issue 19 §6). 0 turns it off."""
    registration_sync_grace: float = ControllerSettings.runner_registration_grace
    """A zombie must be this old, an orphan seen this long, before either is repaired, so a
    registration in flight (cache lag, a status write not seen yet) is never mistaken."""
    runner_hang_timeout: float = ControllerSettings.runner_hang_timeout
    """``--runner-hang-timeout``: seconds a runner's pod may stay up after its job completed
    and GitHub dropped its registration before it is finished (``hangs.py``, ARC #4603).
    Checked by the registration reconcile, so off with it; 0 turns it off."""
    node_loss_timeout: float = ControllerSettings.node_loss_timeout
    max_runners_per_scale_set: int = ControllerSettings.max_runners_per_scale_set
    """``--max-runners-per-scale-set``: caps every set's maxRunners (0: no cap)."""
    """``--node-loss-timeout``: seconds a node may be not Ready before the runner and
    listener pods on it are declared dead (``nodeloss.py``, G18); a deleted node's pods at
    once. 0 turns it off (no Node watch)."""
    listener_failure_backoff: tuple[float, ...] = LISTENER_RESTART_LADDER
    build_version: str = ControllerSettings.build_version
    listener_mode: str = ControllerSettings.listener_mode
    """``--listener-mode``: ``InProcess`` runs every scale set's listener as a task of the
    elected controller (shared memory, standby takeover, no pod in the controller's namespace
    for a tenant to shape); ``Pod`` runs one listener pod per scale set, as ARC does."""
    release_sessions_on_stop: bool = ControllerSettings.release_sessions_on_stop
    """``--release-sessions-on-stop``: stopping for good (rollback to ARC, uninstall);
    message sessions and gharc's own annotations are released on stop (``handoff.py``)."""
    listener_resync_seconds: float = 600.0
    """In-process listeners: how often the GitHub Secret is looked at again, so a token or
    App key rotated inside the same Secret is used within this time (up to a quarter more,
    spread) plus the Secret cache's 30 s (no-job-stranded / G19), with nothing deleted or
    restarted by hand. A rejected credential does not wait for it: the listener reads the
    Secret afresh after the failure. Ten minutes, not one: at 1,000 scale sets a 60 s resync
    was 17 reconciles and Secret reads a second in an idle controller."""
    allow_unrestricted_listener_template: bool = (
        ControllerSettings.allow_unrestricted_listener_template
    )
    """``--allow-unrestricted-listener-template``: merge any ``listenerTemplate`` as ARC
    does (extra containers, volumes, host namespaces...). Only for single-tenant clusters:
    the listener pod runs in the controller's namespace (see docs/security.md)."""
    user_agent: str = field(default=f"{c.USER_AGENT_PREFIX}gharc")

    @property
    def listener_in_process(self) -> bool:
        """Listeners run as tasks of this process (``--listener-mode InProcess``); the
        reconcilers ask this rather than compare the flag's value themselves."""
        return self.listener_mode == LISTENER_MODE_IN_PROCESS
