"""Reconcile EphemeralRunners against GitHub's runner list, per scale set (G13).

Two kinds of drift nothing else notices, because no watch event ever reports them:

* A **zombie**: GitHub deleted a runner's registration while its pod runs on, idle; the
  runner can never be given a job (ARC #4396/#4399: 27 runners idle for hours while jobs
  queued), yet it counts toward the set's replicas. Its EphemeralRunner is deleted so the
  EphemeralRunnerSet makes a replacement.
* An **orphan**: a registration of this scale set that no EphemeralRunner holds (a JIT
  answer lost and given up on, a runner deleted while GitHub was unreachable). It is
  removed at GitHub, so it does not linger offline or skew the scale set's statistics.
* A **hung runner** (:mod:`hangs`, ARC #4603): its job done and its registration gone, its
  process never exited; after ``hang_timeout`` it is finished.

Every ``interval`` seconds the leader lists the registrations of each scope once (one
call per GitHub client, whose answer covers every scale set of its scope) and compares them
with the EphemeralRunners in the shared cache. A *quiet* scale set (no EphemeralRunner now,
no registration at its last look, its EphemeralRunnerSets unchanged since) is looked at on
every ``full_every``-th pass only: at 1,000 idle sets a look at each every minute was 1,000
Secret reads and 1,000 list calls a minute for nothing. Anything that could leave drift
behind (a runner created or deleted) changes its EphemeralRunnerSet's status first.

A zombie must be at least ``grace`` seconds old and an orphan must have been seen
``grace`` seconds ago already, so a fresh registration whose status write (or whose
EphemeralRunner) the cache does not show yet is never mistaken for either. A busy runner is
never touched: a zombie must be idle (no job recorded), an orphan must hold no job at
GitHub (and GitHub refuses to remove a busy one anyway). Each repair is a Warning event on
the EphemeralRunnerSet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset.views import EphemeralRunnerSetView, EphemeralRunnerView
from gharc.controllers.scaleset.credentials import ClientResolver, ConfigurationError, GitHubTarget
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.ephemeralrunner import now as wall_now
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.hangs import DEFAULT_HANG_TIMEOUT, HangReaper
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.github import errors as gherrors
from gharc.github.actions import ActionsClient
from gharc.kube import objects
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.events import WARNING
from gharc.kube.manager import ManagerLike
from gharc.kube.shardfence import acting_for

log = logging.getLogger(__name__)

JSON = dict[str, Any]

SWEEP_SECRET_MAX_AGE = 600.0
"""How old a remembered credentials Secret the pass may use (the reconciles' TTL is 30 s):
at a minute a pass, a 30 s TTL made it re-read every set's Secret each time it looked at
the set (about 100 GETs a minute at 1,000 sets). A rotated, revoked token costs at most one
pass: a 401 or 403 forgets the Secret, as an in-process listener's rejection does."""

#: The defaults of ``--runner-registration-sync-interval`` and ``--runner-registration-grace``
#: (why these values: their declarations).
DEFAULT_INTERVAL = ScaleSetOptions.registration_sync_interval
DEFAULT_GRACE = ScaleSetOptions.registration_sync_grace


@dataclass(frozen=True, slots=True)
class GitHubRunner:
    id: int
    name: str
    scale_set_id: int
    busy: bool


def _target_of(runner_set: JSON) -> GitHubTarget:
    """The GitHub scope and credentials an EphemeralRunnerSet's runners use."""
    spec = EphemeralRunnerSetView(runner_set).runner_spec
    return GitHubTarget.from_spec(str(objects.meta(runner_set).get("namespace")), spec)


def scale_set_runners(scope: list[dict[str, Any]], scale_set_id: int) -> list[GitHubRunner]:
    """The registrations of ``scale_set_id`` among a scope's agent list (the service's agent
    list asked for assigned requests: one call for the whole scope), with whether each
    holds a job."""
    found = []
    for item in scope:
        ss = int(item.get("runnerScaleSetId") or 0)
        if ss != scale_set_id:
            continue
        found.append(
            GitHubRunner(
                int(item.get("id") or 0),
                str(item.get("name") or ""),
                ss,
                bool(item.get("assignedRequest")),
            )
        )
    return found


@dataclass(eq=False)
class OrphanReconciler:
    """See the module docstring. A leader-only runnable (``need_leader_election``); compared
    and hashed by identity, as the manager keeps its runnables in a dict."""

    kube: KubeClient
    cache: Cache
    resolver: ClientResolver
    recorder: EventRecorder | None = None
    interval: float = DEFAULT_INTERVAL
    grace: float = DEFAULT_GRACE
    clock: Callable[[], float] = time.monotonic
    hang_timeout: float = DEFAULT_HANG_TIMEOUT
    """Runners still Running this long after GitHub dropped them after their job are
    finished (:mod:`hangs`, ARC #4603); 0 turns it off."""
    need_leader_election: bool = True
    shard_for: Callable[[JSON], int | None] | None = None
    """With ``--shards`` > 1: the held shard of an EphemeralRunnerSet's scale set, None when
    another replica holds it (that replica sweeps the set)."""
    full_every: int = 10
    """Every n-th pass (the first included) looks at quiet scale sets too (see the module
    docstring): a registration made outside the controller is found within n intervals."""
    scope_max_age: float = 5.0
    """Seconds a scope's agent list serves further scale sets of the same pass."""
    _orphan_since: dict[tuple[int, int], float] = field(default_factory=dict)
    _quiet: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    """Quiet scale sets and the resourceVersions of their EphemeralRunnerSets then."""
    _passes: int = 0
    _scopes: dict[ActionsClient, tuple[float, list[dict[str, Any]]]] = field(default_factory=dict)
    """A scope's agent list by the client that read it (hashed by identity), this pass."""
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _hangs: HangReaper | None = None
    _hung_seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.hang_timeout > 0:
            self._hangs = HangReaper(self.kube, self.recorder, self.hang_timeout, self.clock)

    async def start(self) -> None:
        self._stop.clear()
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval)
                return
            try:
                await self.sweep()
            except Exception:  # one bad pass must not end the loop; the next one retries
                log.exception("runner registration reconcile failed")

    async def stop(self) -> None:
        self._stop.set()

    async def sweep(self) -> None:
        """One pass over every scale set the cache knows an EphemeralRunnerSet of (quiet
        ones on every ``full_every``-th pass only)."""
        groups: dict[tuple[str, int], list[JSON]] = {}
        for ers in await self.cache.list(EPHEMERAL_RUNNER_SETS):
            view = EphemeralRunnerSetView(ers)
            ss_id = view.scale_set_id
            if ss_id and not objects.is_deleting(ers):
                groups.setdefault((view.github_config_url, ss_id), []).append(ers)
        runners_by_set: dict[int, list[JSON]] = {}
        for er in await self.cache.list(EPHEMERAL_RUNNERS):
            ss_id = EphemeralRunnerView(er).scale_set_id
            if ss_id:
                runners_by_set.setdefault(ss_id, []).append(er)
        full = self._passes % max(1, self.full_every) == 0
        self._passes += 1
        self._scopes = {}
        seen_orphans: set[tuple[int, int]] = set()
        quiet: dict[tuple[str, int], tuple[str, ...]] = {}
        self._hung_seen = set()
        for key, sets in groups.items():
            ss_id = key[1]
            shard = None if self.shard_for is None else self.shard_for(sets[0])
            if self.shard_for is not None and shard is None:
                continue
            versions = tuple(sorted(str(objects.meta(s).get("resourceVersion")) for s in sets))
            candidates = runners_by_set.get(ss_id, [])
            if not full and not candidates and self._quiet.get(key) == versions:
                quiet[key] = versions
                continue
            try:
                with acting_for(shard):
                    registrations = await self._sweep_scale_set(
                        ss_id, sets, candidates, seen_orphans
                    )
            except (gherrors.GitHubError, ConfigurationError) as err:
                if isinstance(err, gherrors.Unauthorized | gherrors.Forbidden):
                    # Read the credentials afresh next pass: they may have been rotated.
                    self.resolver.forget_credentials(_target_of(sets[0]))
                log.info("registration reconcile of scale set %d skipped: %s", ss_id, err)
                continue
            if not candidates and not registrations:
                quiet[key] = versions
        self._quiet = quiet
        self._scopes = {}
        # Drift that healed (or whose objects went away) starts its grace afresh next time.
        self._orphan_since = {k: v for k, v in self._orphan_since.items() if k in seen_orphans}
        if self._hangs is not None:
            self._hangs.keep_only(self._hung_seen)

    async def _registrations(self, client: ActionsClient, ss_id: int) -> list[GitHubRunner]:
        """The scale set's registrations, from its scope's agent list: one call per client
        per pass while the answer is fresh."""
        now = self.clock()
        hit = self._scopes.get(client)
        if hit is None or now - hit[0] > self.scope_max_age:
            hit = self._scopes[client] = (now, await client.list_runners())
        return scale_set_runners(hit[1], ss_id)

    async def _sweep_scale_set(
        self,
        ss_id: int,
        sets: list[JSON],
        candidates: list[JSON],
        seen_orphans: set[tuple[int, int]],
    ) -> int:
        """Repair one scale set; the number of its registrations at GitHub."""
        owner = sets[0]
        client = await self.resolver.client_for(_target_of(owner), max_age=SWEEP_SECRET_MAX_AGE)
        at_github = await self._registrations(client, ss_id)
        registered = {r.id for r in at_github}
        namespaces = {str(objects.meta(s).get("namespace")) for s in sets}
        mine = [er for er in candidates if str(objects.meta(er).get("namespace")) in namespaces]
        held_ids = {rid for rid in (EphemeralRunnerView(er).runner_id for er in mine) if rid}
        held_names = {str(objects.meta(er).get("name")) for er in mine}
        sets_by_uid = {str(objects.meta(s).get("uid")): s for s in sets}
        if self._hangs is not None:
            self._hung_seen |= await self._hangs.check(mine, registered)
        now = self.clock()

        for er in mine:
            runner = EphemeralRunnerView(er)
            rid = runner.runner_id
            if (
                not rid
                or rid in registered
                or objects.is_deleting(er)
                or runner.has_job
                or not runner.is_running
            ):
                continue
            # Registered for at least the grace (registration follows creation within
            # seconds): a fresh runner is never mistaken, and an old one whose registration
            # is gone is replaced at the first pass that sees it, not one interval later.
            created = objects.parse_time(objects.meta(er).get("creationTimestamp"))
            if created is None or (wall_now() - created).total_seconds() < self.grace:
                continue
            ers = self._owner_set(er, sets_by_uid) or owner
            await emit(
                self.recorder,
                ers,
                WARNING,
                "RunnerRegistrationGone",
                f"runner {rid} of EphemeralRunner {objects.meta(er).get('name')} is no longer "
                "registered at GitHub and cannot get a job; deleting it so the set replaces it",
            )
            await self.kube.delete(EPHEMERAL_RUNNERS, er, missing_ok=True)

        for r in at_github:
            if r.id in held_ids or r.name in held_names or r.busy:
                continue
            key = (ss_id, r.id)
            seen_orphans.add(key)
            since = self._orphan_since.setdefault(key, now)
            if now - since < self.grace:
                continue
            try:
                await client.remove_runner(r.id)
            except (gherrors.AgentNotFound, gherrors.JobStillRunning):
                continue
            self._orphan_since.pop(key, None)
            await emit(
                self.recorder,
                owner,
                WARNING,
                "OrphanRegistrationRemoved",
                f"runner {r.id} ({r.name}) was registered in scale set {ss_id} with no "
                "EphemeralRunner holding it; removed it at GitHub",
            )
        return len(at_github)

    @staticmethod
    def _owner_set(er: JSON, sets_by_uid: dict[str, JSON]) -> JSON | None:
        for ref in objects.meta(er).get("ownerReferences") or ():
            found = sets_by_uid.get(str(ref.get("uid")))
            if found is not None:
                return found
        return None


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> OrphanReconciler | None:
    """Add the reconcile to ``manager`` (leader only); an interval of 0 turns it off."""
    options = deps.options
    if options.registration_sync_interval <= 0:
        return None
    runnable = OrphanReconciler(
        deps.client(manager),
        manager.cache,
        deps.resolver,
        deps.recorder,
        interval=options.registration_sync_interval,
        grace=options.registration_sync_grace,
        hang_timeout=options.runner_hang_timeout,
    )
    manager.add(runnable)
    return runnable
