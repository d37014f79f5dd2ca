"""The two pull metrics of an HRA and how they combine (legacy.md 3.2-3.3, ARC ``autoscaling.go``).

Each metric is split into a pure formula (tested with tables: inputs in, ARC's number out)
and a thin gathering step that asks GitHub and the cluster for those inputs. Errors that
only the user can fix raise :class:`MetricError`; the reconciler reports them as events.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gharc.github.models import Runner, WorkflowJob, WorkflowRun

log = logging.getLogger(__name__)

QUEUED_AND_IN_PROGRESS = "TotalNumberOfQueuedAndInProgressWorkflowRuns"
PERCENTAGE_RUNNERS_BUSY = "PercentageRunnersBusy"
SELF_HOSTED = "self-hosted"

DEFAULT_SCALE_UP_THRESHOLD = 0.8
DEFAULT_SCALE_DOWN_THRESHOLD = 0.3
DEFAULT_SCALE_UP_FACTOR = 1.3
DEFAULT_SCALE_DOWN_FACTOR = 0.7


class MetricError(ValueError):
    """The HRA's metrics cannot be evaluated as written."""


class GitHubReader(Protocol):
    """What the metrics read from GitHub (a scope's :class:`gharc.github.RestClient`)."""

    async def list_runners(self) -> list[Runner]: ...

    async def list_workflow_runs(self, owner: str, repo: str, status: str) -> list[WorkflowRun]: ...

    async def list_workflow_jobs(self, owner: str, repo: str, run_id: int) -> list[WorkflowJob]: ...


@dataclass(frozen=True)
class ScaleTarget:
    """What the HRA needs to know of its RunnerDeployment or RunnerSet."""

    kind: str  # "RunnerDeployment" | "RunnerSet"
    name: str
    namespace: str
    enterprise: str = ""
    organization: str = ""
    repository: str = ""
    group: str = ""
    labels: tuple[str, ...] = ()
    replicas: int = 1
    """``spec.replicas`` (unset: 1, as :class:`gharc.api.legacy.views.ReplicatedView`)."""
    ephemeral: bool = True
    runner_names: frozenset[str] = field(default_factory=frozenset)
    busy_terminating: frozenset[str] = field(default_factory=frozenset)
    """Pods of the target whose RemoveRunner was refused (runner still busy)."""

    @property
    def metric_kind(self) -> str:
        """ARC's lower-case kind label (``runnerdeployment``/``runnerset``)."""
        return self.kind.lower()


# ---- TotalNumberOfQueuedAndInProgressWorkflowRuns ---------------------------------------


@dataclass
class WorkflowCounts:
    queued: int = 0
    in_progress: int = 0
    completed: int = 0
    unknown: int = 0

    @property
    def necessary_replicas(self) -> int:
        return self.queued + self.in_progress


def job_matches(job_labels: Sequence[str], target_labels: Iterable[str]) -> bool:
    """Pull-metric label rule: every job label but ``self-hosted`` is a target label.

    Exact, case-sensitive membership (the webhook uses case-insensitive matching; ARC
    differs between the two and so do we). A job without labels never matches.
    """
    if not job_labels:
        return False
    have = set(target_labels)
    return all(label == SELF_HOSTED or label in have for label in job_labels)


def count_jobs(counts: WorkflowCounts, jobs: Sequence[WorkflowJob], labels: Sequence[str]) -> None:
    """Add one run's matching jobs to ``counts`` (completed jobs count nowhere)."""
    for job in jobs:
        if not job_matches(job.labels, labels):
            continue
        if job.status == "queued":
            counts.queued += 1
        elif job.status == "in_progress":
            counts.in_progress += 1
        elif job.status != "completed":
            counts.unknown += 1


def repositories_for(target: ScaleTarget, metric: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(owner, repo) pairs whose runs count for ``target``."""
    if target.repository:
        owner, _, name = target.repository.partition("/")
        return [(owner, name)]
    if not target.organization:
        raise MetricError(
            f"{QUEUED_AND_IN_PROGRESS} needs a repository or organization target; "
            f"{target.kind} {target.name} has neither (spec.template.organization is empty)"
        )
    names = [str(n) for n in metric.get("repositoryNames") or []]
    if not names:
        raise MetricError(
            "spec.metrics[].repositoryNames is required (one or more entries) for an "
            "organization-scoped target"
        )
    return [(target.organization, n) for n in names]


async def queued_and_in_progress(
    github: GitHubReader, target: ScaleTarget, metric: Mapping[str, Any]
) -> WorkflowCounts:
    """Count queued and in-progress jobs of matching labels over the target's repositories."""
    counts = WorkflowCounts()
    for owner, repo in repositories_for(target, metric):
        runs = [
            *await github.list_workflow_runs(owner, repo, "queued"),
            *await github.list_workflow_runs(owner, repo, "in_progress"),
        ]
        for run in runs:
            if run.status == "completed":
                counts.completed += 1
            elif run.status in ("queued", "in_progress"):
                if not run.id:
                    continue
                try:
                    jobs = await github.list_workflow_jobs(owner, repo, run.id)
                except Exception as err:  # ARC logs and skips the run
                    log.warning("listing jobs of %s/%s run %s: %s", owner, repo, run.id, err)
                    continue
                count_jobs(counts, jobs, target.labels)
            else:
                counts.unknown += 1
    return counts


# ---- PercentageRunnersBusy --------------------------------------------------------------


@dataclass(frozen=True)
class BusyParams:
    scale_up_threshold: float = DEFAULT_SCALE_UP_THRESHOLD
    scale_down_threshold: float = DEFAULT_SCALE_DOWN_THRESHOLD
    scale_up_factor: float = DEFAULT_SCALE_UP_FACTOR
    scale_down_factor: float = DEFAULT_SCALE_DOWN_FACTOR
    scale_up_adjustment: int = 0
    scale_down_adjustment: int = 0


def _float(metric: Mapping[str, Any], key: str, default: float) -> float:
    raw = metric.get(key)
    if raw is None or raw == "":
        return default
    try:
        return float(str(raw))
    except ValueError:
        raise MetricError(f"spec.metrics[].{key} {raw!r} is not a number") from None


def busy_params(metric: Mapping[str, Any]) -> BusyParams:
    """Thresholds, factors and adjustments with ARC's defaults and validation."""
    up_adj = int(metric.get("scaleUpAdjustment") or 0)
    down_adj = int(metric.get("scaleDownAdjustment") or 0)
    for key, adj, factor_key in (
        ("scaleUpAdjustment", up_adj, "scaleUpFactor"),
        ("scaleDownAdjustment", down_adj, "scaleDownFactor"),
    ):
        if adj < 0:
            raise MetricError(f"spec.metrics[].{key} cannot be lower than 0")
        if adj and metric.get(factor_key):
            raise MetricError(f"spec.metrics[]: {key} and {factor_key} cannot be set together")
    return BusyParams(
        scale_up_threshold=_float(metric, "scaleUpThreshold", DEFAULT_SCALE_UP_THRESHOLD),
        scale_down_threshold=_float(metric, "scaleDownThreshold", DEFAULT_SCALE_DOWN_THRESHOLD),
        scale_up_factor=DEFAULT_SCALE_UP_FACTOR
        if up_adj
        else _float(metric, "scaleUpFactor", DEFAULT_SCALE_UP_FACTOR),
        scale_down_factor=DEFAULT_SCALE_DOWN_FACTOR
        if down_adj
        else _float(metric, "scaleDownFactor", DEFAULT_SCALE_DOWN_FACTOR),
        scale_up_adjustment=up_adj,
        scale_down_adjustment=down_adj,
    )


@dataclass(frozen=True)
class BusyCounts:
    runners: int
    registered: int
    busy: int
    terminating_busy: int


def count_busy(
    runner_names: frozenset[str], github_runners: Sequence[Runner], busy_terminating: frozenset[str]
) -> BusyCounts:
    """Registered and busy runners of the target, plus busy ones being terminated.

    A pod whose RemoveRunner was refused (422: still busy) counts as busy even when GitHub
    says idle or does not list it yet: its job is not finished from the cluster's view.
    """
    registered = busy = terminating = 0
    pending = set(busy_terminating)
    for r in github_runners:
        if r.name not in runner_names:
            continue
        registered += 1
        if r.busy:
            busy += 1
        elif r.name in pending:
            terminating += 1
        pending.discard(r.name)
    return BusyCounts(len(runner_names), registered, busy, terminating + len(pending))


def percentage_busy_desired(params: BusyParams, replicas: int | None, busy: int) -> int:
    """ARC's PercentageRunnersBusy step; ``busy`` includes terminating-busy runners.

    Scale up rounds up (ceil), scale down truncates toward zero, so 1 runner at factor 0.7
    becomes 0 and the caller falls back to minReplicas. The result may be <= 0.
    """
    before = 1 if replicas is None else replicas
    # Go float division: x/0 is +Inf, 0/0 is NaN (which passes neither threshold)
    zero = math.inf if busy > 0 else math.nan
    fraction = busy / before if before else zero
    if fraction >= params.scale_up_threshold:
        if params.scale_up_adjustment > 0:
            return before + params.scale_up_adjustment
        return math.ceil(before * params.scale_up_factor)
    if fraction < params.scale_down_threshold:
        if params.scale_down_adjustment > 0:
            return before - params.scale_down_adjustment
        return int(before * params.scale_down_factor)
    return before  # ARC dereferences st.replicas here (a nil panic); before is the intent


# ---- combination ------------------------------------------------------------------------


@dataclass
class Suggestion:
    """What the metrics suggest (None: use minReplicas) and the numbers behind it."""

    replicas: int | None
    workflow: WorkflowCounts | None = None
    busy: BusyCounts | None = None
    busy_desired: int | None = None


def validate_metrics(metrics: Sequence[Mapping[str, Any]]) -> None:
    """Reject metric lists ARC rejects, before any API call is spent on them."""
    if len(metrics) > 2:
        raise MetricError(f"too many autoscaling metrics: at most 2, got {len(metrics)}")
    if not metrics:
        return
    first = str(metrics[0].get("type") or "")
    if first not in (QUEUED_AND_IN_PROGRESS, PERCENTAGE_RUNNERS_BUSY):
        raise MetricError(f"unsupported metric type {first!r}")
    if first == PERCENTAGE_RUNNERS_BUSY:
        busy_params(metrics[0])
    if len(metrics) == 2:
        second = str(metrics[1].get("type") or "")
        if (first, second) != (PERCENTAGE_RUNNERS_BUSY, QUEUED_AND_IN_PROGRESS):
            raise MetricError(
                f"metrics[0] of {first} cannot be combined with metrics[1] of {second}: the "
                f"only allowed combination is 0={PERCENTAGE_RUNNERS_BUSY} and "
                f"1={QUEUED_AND_IN_PROGRESS}"
            )


async def suggest_replicas(
    github: GitHubReader, target: ScaleTarget, metrics: Sequence[Mapping[str, Any]]
) -> Suggestion:
    """ARC's ``suggestDesiredReplicas``: the primary metric, then the fallback if any."""
    validate_metrics(metrics)
    if not metrics:
        return Suggestion(None)
    primary = metrics[0]
    out = Suggestion(None)
    if primary.get("type") == QUEUED_AND_IN_PROGRESS:
        out.workflow = await queued_and_in_progress(github, target, primary)
        value = out.workflow.necessary_replicas
    else:
        params = busy_params(primary)
        runners = await github.list_runners()
        out.busy = count_busy(target.runner_names, runners, target.busy_terminating)
        value = percentage_busy_desired(
            params, target.replicas, out.busy.busy + out.busy.terminating_busy
        )
        out.busy_desired = value
    if value > 0:
        out.replicas = value
        return out
    if len(metrics) == 1:
        return out
    out.workflow = await queued_and_in_progress(github, target, metrics[1])
    out.replicas = out.workflow.necessary_replicas
    return out
