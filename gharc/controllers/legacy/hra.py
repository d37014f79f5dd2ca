"""HorizontalRunnerAutoscaler controller (legacy.md 3; ARC
``horizontalrunnerautoscaler_controller.go``).

One reconcile: read the HRA and its target, compute minReplicas (scheduled overrides),
ask the metrics for a suggestion, add capacity reservations, clamp, hold scale-downs
inside the delay window, then write the target's ``spec.replicas`` (and ``effectiveTime``
for ephemeral targets, B5) and the HRA's status. ``default_scale_down_delay`` and
``sync_period`` default to the declarations of ``--default-scale-down-delay`` and
``--sync-period`` (:class:`~gharc.controllers.legacy.options.LegacyOptions`), so a reconciler
built directly, as tests do, behaves as the process started without flags.

Differences from ARC, each for a reason:

* ARC re-evaluates on the manager's 1-minute resync; gharc's informers do not resync, so
  the reconcile asks to be requeued after ``sync_period`` (``--sync-period``), or sooner
  when it knows the answer changes earlier (a reservation expires, the scale-down hold
  ends, a scheduled override starts or ends). Scaling therefore follows the clock exactly
  instead of up to a minute late.
* An invalid HRA (no minReplicas/maxReplicas, bad metrics, bad schedule) gets a Warning
  event ``RunnerAutoscalingFailure`` naming the field and is not retried until it changes
  (ARC retries with backoff forever, with the same message as a Normal event).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gharc.api import schedule
from gharc.api.legacy import constants as lc
from gharc.api.legacy.views import (
    HorizontalRunnerAutoscalerView,
    ReplicatedView,
    RunnerConfigView,
)
from gharc.api.resources import (
    HORIZONTAL_RUNNER_AUTOSCALERS,
    RUNNER_DEPLOYMENTS,
    RUNNER_SETS,
    RUNNERS,
)
from gharc.controllers.legacy import capacity
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.hra_github import CredentialsUnavailable
from gharc.controllers.legacy.hra_metrics import (
    PERCENTAGE_RUNNERS_BUSY,
    GitHubReader,
    MetricError,
    ScaleTarget,
    Suggestion,
    suggest_replicas,
    validate_metrics,
)
from gharc.controllers.legacy.hra_prometheus import HRAMetrics
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.timeutil import from_timestamp
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.client import KubeClient, Reader
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, WARNING
from gharc.kube.labels import Selector
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import GenerationChangedPredicate, ResourceVersionChangedPredicate
from gharc.kube.reconcile import Request, Result, TerminalError
from gharc.kube.resources import PODS, Resource

log = logging.getLogger(__name__)

JSON = dict[str, Any]
REASON_FAILURE = "RunnerAutoscalingFailure"
REASON_SCALED = "RunnerAutoscaled"
_MIN_REQUEUE = 0.2

__all__ = ["HRAReconciler", "InvalidHRA", "setup"]


class InvalidHRA(TerminalError):
    """The HRA cannot be evaluated as written; retrying does not help."""


class ClientSource(Protocol):
    async def client_for(
        self, hra: Mapping[str, Any], enterprise: str, organization: str, repository: str
    ) -> GitHubReader: ...


class Recorder(Protocol):
    def record(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> Any: ...


class HRAReconciler:
    """Reconciles one HRA. ``clock`` returns epoch seconds (injectable for tests)."""

    def __init__(
        self,
        client: KubeClient,
        reader: Reader,
        clients: ClientSource,
        *,
        recorder: Recorder | None = None,
        metrics: HRAMetrics | None = None,
        default_scale_down_delay: float = LegacyOptions.default_scale_down_delay,
        sync_period: float = LegacyOptions.sync_period,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.reader = reader
        self.clients = clients
        self.recorder = recorder
        self.metrics = metrics
        self.default_scale_down_delay = dt.timedelta(seconds=default_scale_down_delay)
        self.sync_period = sync_period
        self.clock = clock

    # ---- events -------------------------------------------------------------------------

    async def _event(self, obj: Mapping[str, Any], type_: str, reason: str, msg: str) -> None:
        meta = objects.meta(obj)
        log.info("HRA %s/%s: %s: %s", meta.get("namespace"), meta.get("name"), reason, msg)
        if self.recorder is None:
            return
        try:
            result = self.recorder.record(obj, type_, reason, msg)
            if hasattr(result, "__await__"):
                await result
        except Exception:
            log.warning("could not record event %s", reason, exc_info=True)

    async def _fail(self, hra: Mapping[str, Any], message: str) -> InvalidHRA:
        await self._event(hra, WARNING, REASON_FAILURE, message)
        return InvalidHRA(message)

    # ---- target -------------------------------------------------------------------------

    async def _names(
        self, resource: Resource, namespace: str, selector: Selector
    ) -> frozenset[str]:
        objs = await self.reader.list(resource, namespace=namespace)
        return frozenset(str(o["metadata"]["name"]) for o in objs if selector.matches_object(o))

    async def _busy_terminating(self, namespace: str, label: str, name: str) -> frozenset[str]:
        pods = await self.reader.list(PODS, namespace=namespace, label_selector={label: name})
        return frozenset(
            str(p["metadata"]["name"])
            for p in pods
            if (
                (p["metadata"].get("annotations") or {}).get(
                    lc.ANNOTATION_UNREGISTRATION_FAILURE_MESSAGE
                )
            )
        )

    async def _target(
        self, hra: Mapping[str, Any], need_runners: bool
    ) -> tuple[Resource, JSON, ScaleTarget] | None:
        ns = str(hra["metadata"]["namespace"])
        ref = objects.spec_of(hra).get("scaleTargetRef") or {}
        kind = str(ref.get("kind") or lc.KIND_RUNNER_DEPLOYMENT)
        name = str(ref.get("name") or "")
        if not name:
            return None
        resource = RUNNER_SETS if kind == lc.KIND_RUNNER_SET else RUNNER_DEPLOYMENTS
        try:
            obj = await self.reader.get(resource, name, namespace=ns)
        except kerrors.NotFound:
            return None
        if objects.is_deleting(obj):
            return None
        spec = objects.spec_of(obj)
        if resource is RUNNER_SETS:
            runner_spec = spec
            label = lc.LABEL_RUNNER_SET_NAME
            selector = Selector.from_label_selector(spec.get("selector") or {})
            names_of: Resource = PODS
        else:
            runner_spec = objects.spec_of(spec.get("template") or {})
            label = lc.LABEL_RUNNER_DEPLOYMENT_NAME
            sel = spec.get("selector")
            selector = (
                Selector.from_label_selector(sel)
                if sel
                else Selector.from_labels({lc.LABEL_RUNNER_DEPLOYMENT_NAME: name})
            )
            names_of = RUNNERS
        runner_names: frozenset[str] = frozenset()
        busy_terminating: frozenset[str] = frozenset()
        if need_runners:
            runner_names = await self._names(names_of, ns, selector)
            busy_terminating = await self._busy_terminating(ns, label, name)
        runner = RunnerConfigView(runner_spec)
        target = ScaleTarget(
            kind=resource.kind,
            name=name,
            namespace=ns,
            **runner.scope,
            replicas=ReplicatedView(obj).replicas,
            ephemeral=runner.ephemeral,
            runner_names=runner_names,
            busy_terminating=busy_terminating,
        )
        return resource, obj, target

    # ---- reconcile ----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self.reader.get, HORIZONTAL_RUNNER_AUTOSCALERS, request, self.reconcile_hra
        )

    async def reconcile_hra(self, hra: JSON) -> Result | None:
        request = request_of(hra)
        if objects.is_deleting(hra):
            return None
        if self.metrics is not None:
            self.metrics.set_spec(hra)
        spec = objects.spec_of(hra)
        now = from_timestamp(self.clock())
        name = f"{request.namespace}/{request.name}"
        view = HorizontalRunnerAutoscalerView(hra)
        spec_min, spec_max = view.min_replicas, view.max_replicas
        if spec_min is None:
            raise await self._fail(hra, f"horizontalrunnerautoscaler {name} is missing minReplicas")
        if spec_max is None:
            raise await self._fail(hra, f"horizontalrunnerautoscaler {name} is missing maxReplicas")
        metrics_spec = list(spec.get("metrics") or [])
        try:
            validate_metrics(metrics_spec)
            min_override, active, upcoming = schedule.match_overrides(
                now, spec.get("scheduledOverrides") or []
            )
        except (MetricError, schedule.ScheduleError) as err:
            raise await self._fail(hra, f"horizontalrunnerautoscaler {name}: {err}") from None
        min_replicas = spec_min if spec_min >= 0 else 1
        if min_override is not None:
            min_replicas = min_override

        need_runners = any(m.get("type") == PERCENTAGE_RUNNERS_BUSY for m in metrics_spec)
        found = await self._target(hra, need_runners)
        if found is None:
            return Result(requeue_after=self.sync_period)  # ARC: wait for the next resync
        resource, target_obj, target = found

        suggestion = Suggestion(None)
        if metrics_spec:
            try:
                github = await self.clients.client_for(
                    hra, target.enterprise, target.organization, target.repository
                )
                suggestion = await suggest_replicas(github, target, metrics_spec)
            except (MetricError, CredentialsUnavailable) as err:
                raise await self._fail(hra, f"horizontalrunnerautoscaler {name}: {err}") from None
            except Exception as err:
                await self._event(hra, WARNING, REASON_FAILURE, f"computing replicas: {err}")
                raise
            self._export(hra, target, suggestion)

        status = objects.status_of(hra)
        reservations = list(spec.get("capacityReservations") or [])
        delay_s = spec.get("scaleDownDelaySecondsAfterScaleOut")
        delay = (
            dt.timedelta(seconds=int(delay_s))
            if delay_s is not None
            else self.default_scale_down_delay
        )
        decision = capacity.decide_replicas(
            suggested=suggestion.replicas,
            min_replicas=min_replicas,
            max_replicas=spec_max,
            reservations=reservations,
            status_desired=view.desired_replicas,
            last_scale_out=objects.parse_time(
                status.get("lastSuccessfulScaleOutTime"), strict=True
            ),
            scale_down_delay=delay,
            now=now,
        )
        desired = decision.replicas
        await self._apply(hra, resource, target_obj, target, desired, reservations)
        await self._write_status(hra, status, desired, spec_min, active, upcoming)
        return Result(requeue_after=self._next_wake(now, decision, reservations, active, upcoming))

    def _export(self, hra: Mapping[str, Any], target: ScaleTarget, s: Suggestion) -> None:
        if self.metrics is None:
            return
        if s.workflow is not None:
            self.metrics.set_workflow(hra, target, s.workflow)
        if s.busy is not None and s.busy_desired is not None:
            self.metrics.set_busy(hra, target, s.busy, s.busy_desired)

    async def _apply(
        self,
        hra: Mapping[str, Any],
        resource: Resource,
        obj: Mapping[str, Any],
        target: ScaleTarget,
        desired: int,
        reservations: list[Mapping[str, Any]],
    ) -> None:
        """Patch the target's replicas; ephemeral targets also get ``effectiveTime`` (B5)."""
        current = target.replicas
        effective = capacity.latest_effective_time(reservations)
        patch: JSON = {}
        if current != desired:
            patch["replicas"] = desired
        if target.ephemeral and effective is not None:
            value = objects.format_time(effective)
            if objects.spec_of(obj).get("effectiveTime") != value or patch:
                patch["effectiveTime"] = value
        if not patch:
            return
        await self.client.merge_patch(resource, obj, {"spec": patch})
        if "replicas" in patch:
            await self._event(
                hra,
                NORMAL,
                REASON_SCALED,
                f"{target.kind} {target.name}: replicas {current} -> {desired}",
            )

    async def _write_status(
        self,
        hra: Mapping[str, Any],
        status: Mapping[str, Any],
        desired: int,
        spec_min: int,
        active: schedule.Override | None,
        upcoming: schedule.Override | None,
    ) -> None:
        old = HorizontalRunnerAutoscalerView(hra).desired_replicas
        patch: JSON = {}
        if old is None or old != desired:
            if (old is None and desired > 1) or (old is not None and desired > old):
                patch["lastSuccessfulScaleOutTime"] = objects.format_time(
                    from_timestamp(self.clock())
                )
            patch["desiredReplicas"] = desired
        summary = schedule.overrides_summary(spec_min, active, upcoming)
        if summary != status.get("scheduledOverridesSummary"):
            patch["scheduledOverridesSummary"] = summary  # None deletes the key
        if self.metrics is not None:
            self.metrics.set_status(hra, desired)
        if patch:
            await self.client.patch_status(HORIZONTAL_RUNNER_AUTOSCALERS, hra, {"status": patch})

    def _next_wake(
        self,
        now: dt.datetime,
        decision: capacity.Decision,
        reservations: list[Mapping[str, Any]],
        active: schedule.Override | None,
        upcoming: schedule.Override | None,
    ) -> float:
        wake = self.sync_period
        for t in (
            decision.held_until,
            capacity.next_expiration(reservations, now),
            schedule.next_boundary(active, upcoming),
        ):
            if t is not None:
                wake = min(wake, (t - now).total_seconds() + 0.05)
        return max(_MIN_REQUEUE, wake)


def setup(manager: ManagerLike, deps: LegacyDeps) -> Controller:
    """Register the HRA controller on ``manager`` (``For(HRA)`` only, as ARC).

    Reads go through the manager's cache, so it also starts informers for RunnerDeployments,
    RunnerSets, Runners and Pods (shared with the runner controllers). Its GitHub clients
    come from the runners' resolver, so an HRA and the runners of its scope share one
    HTTP cache; its clock is the options' clock, as the runner controllers'.
    """
    options = deps.options
    reconciler = HRAReconciler(
        deps.client(manager),
        manager.cache,
        deps.github,
        recorder=deps.recorder,
        metrics=deps.hra_metrics,
        default_scale_down_delay=options.default_scale_down_delay,
        sync_period=options.sync_period,
        clock=lambda: options.clock().timestamp(),
    )
    for resource in (RUNNER_DEPLOYMENTS, RUNNER_SETS, RUNNERS, PODS):
        manager.cache.informer(resource)
    hras = manager.cache.informer(HORIZONTAL_RUNNER_AUTOSCALERS)

    def autoscalers_of(kind: str) -> Callable[[JSON], list[Request]]:
        """HRAs that scale this object. ARC waits for its one-minute resync when an HRA
        is reconciled before its target is cached; our informers do not resync, so the
        target's own events wake the HRA instead (level-triggered, no polling)."""

        def mapper(obj: JSON) -> list[Request]:
            meta = objects.meta(obj)
            ns, name = meta.get("namespace"), meta.get("name")
            out = []
            for hra in hras.store.list(ns):
                ref = objects.spec_of(hra).get("scaleTargetRef") or {}
                if (
                    ref.get("name") == name
                    and (ref.get("kind") or lc.KIND_RUNNER_DEPLOYMENT) == kind
                ):
                    out.append(Request(str(ns), str(hra["metadata"]["name"])))
            return out

        return mapper

    return (
        Builder(manager)
        .named("horizontalrunnerautoscaler")
        .for_(HORIZONTAL_RUNNER_AUTOSCALERS, ResourceVersionChangedPredicate())
        .watches(
            RUNNER_DEPLOYMENTS,
            autoscalers_of(lc.KIND_RUNNER_DEPLOYMENT),
            GenerationChangedPredicate(),
        )
        .watches(RUNNER_SETS, autoscalers_of(lc.KIND_RUNNER_SET), GenerationChangedPredicate())
        .complete(reconciler)
    )
