"""ARC's HRA metric formulas, as tables: known inputs in, ARC's replica count out."""

from __future__ import annotations

import pytest

from gharc.controllers.legacy.hra_metrics import (
    BusyParams,
    MetricError,
    ScaleTarget,
    WorkflowCounts,
    busy_params,
    count_busy,
    count_jobs,
    job_matches,
    percentage_busy_desired,
    repositories_for,
    suggest_replicas,
    validate_metrics,
)
from gharc.github.models import Runner, WorkflowJob, WorkflowRun

BUSY = "PercentageRunnersBusy"
QUEUED = "TotalNumberOfQueuedAndInProgressWorkflowRuns"


@pytest.mark.parametrize(
    ("metric", "replicas", "busy", "expected"),
    [
        # defaults: up at >= 0.8 (ceil x1.3), down below 0.3 (trunc x0.7)
        ({}, 10, 8, 13),
        ({}, 10, 10, 13),
        ({}, 10, 7, 10),
        ({}, 10, 3, 10),
        ({}, 10, 2, 7),
        ({}, 1, 0, 0),  # int(0.7) == 0: the caller falls back to minReplicas
        ({}, None, 1, 2),  # nil replicas count as 1
        ({}, 3, 3, 4),  # ceil(3.9)
        ({"scaleUpThreshold": "0.5", "scaleUpFactor": "2"}, 4, 2, 8),
        ({"scaleDownThreshold": "0.5", "scaleDownFactor": "0.5"}, 5, 2, 2),
        ({"scaleUpAdjustment": 3}, 5, 5, 8),
        ({"scaleDownAdjustment": 2}, 5, 0, 3),
        ({"scaleDownAdjustment": 9}, 5, 0, -4),  # may go below zero; clamped later
        ({}, 0, 1, 0),  # busy/0 is +Inf: scale up, ceil(0 * 1.3) == 0
        ({}, 0, 0, 0),  # 0/0 is NaN: neither threshold, keep 0
    ],
)
def test_percentage_runners_busy_gives_arcs_replica_count(
    metric: dict[str, object], replicas: int | None, busy: int, expected: int
) -> None:
    assert percentage_busy_desired(busy_params(metric), replicas, busy) == expected


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ({"scaleUpThreshold": "lots"}, "scaleUpThreshold"),
        ({"scaleDownFactor": "x"}, "scaleDownFactor"),
        ({"scaleUpAdjustment": -1}, "lower than 0"),
        ({"scaleUpAdjustment": 1, "scaleUpFactor": "2"}, "cannot be set together"),
        ({"scaleDownAdjustment": 1, "scaleDownFactor": "0.5"}, "cannot be set together"),
    ],
)
def test_invalid_busy_parameters_are_rejected_with_the_field_named(
    metric: dict[str, object], message: str
) -> None:
    with pytest.raises(MetricError, match=message):
        busy_params(metric)


def test_busy_defaults_are_arcs() -> None:
    assert busy_params({}) == BusyParams(0.8, 0.3, 1.3, 0.7, 0, 0)


def _runner(name: str, busy: bool) -> Runner:
    return Runner(id=hash(name) % 1000, name=name, busy=busy, status="online")


def test_busy_counts_only_the_targets_runners_and_adds_busy_terminating_pods() -> None:
    mine = frozenset({"a", "b", "c", "d"})
    gh = [_runner("a", True), _runner("b", False), _runner("c", False), _runner("x", True)]
    counts = count_busy(mine, gh, frozenset({"c", "d"}))
    # a busy; c idle on GitHub but its RemoveRunner was refused; d not listed yet
    assert (counts.runners, counts.registered, counts.busy, counts.terminating_busy) == (
        4,
        3,
        1,
        2,
    )


@pytest.mark.parametrize(
    ("job_labels", "target_labels", "matches"),
    [
        (["self-hosted", "linux"], ["linux"], True),
        (["linux", "gpu"], ["linux"], False),
        (["self-hosted"], [], True),
        ([], ["linux"], False),
        (["Linux"], ["linux"], False),  # case-sensitive in the pull metric
    ],
)
def test_pull_metric_label_matching_is_exact_and_ignores_self_hosted(
    job_labels: list[str], target_labels: list[str], matches: bool
) -> None:
    assert job_matches(job_labels, target_labels) is matches


def _job(status: str, labels: list[str]) -> WorkflowJob:
    return WorkflowJob(id=1, run_id=1, status=status, labels=labels)


def test_job_counting_sums_queued_and_in_progress_jobs_with_matching_labels() -> None:
    counts = WorkflowCounts()
    jobs = [
        _job("queued", ["self-hosted", "linux"]),
        _job("queued", ["self-hosted", "linux"]),
        _job("in_progress", ["linux"]),
        _job("completed", ["linux"]),
        _job("queued", ["windows"]),
        _job("waiting", ["linux"]),
    ]
    count_jobs(counts, jobs, ["linux"])
    assert (counts.queued, counts.in_progress, counts.unknown) == (2, 1, 1)
    assert counts.necessary_replicas == 3


def test_an_org_target_needs_repository_names_and_an_enterprise_target_is_an_error() -> None:
    org = ScaleTarget("RunnerDeployment", "rd", "ns", organization="acme")
    assert repositories_for(org, {"repositoryNames": ["a", "b"]}) == [("acme", "a"), ("acme", "b")]
    with pytest.raises(MetricError, match="repositoryNames"):
        repositories_for(org, {})
    repo = ScaleTarget("RunnerDeployment", "rd", "ns", repository="acme/app")
    assert repositories_for(repo, {"repositoryNames": ["ignored"]}) == [("acme", "app")]
    ent = ScaleTarget("RunnerDeployment", "rd", "ns", enterprise="big")
    with pytest.raises(MetricError, match="organization"):
        repositories_for(ent, {})


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ([{"type": BUSY}, {"type": QUEUED}, {"type": QUEUED}], "too many"),
        ([{"type": "CPU"}], "unsupported"),
        ([{"type": QUEUED}, {"type": BUSY}], "cannot be combined"),
        ([{"type": BUSY}, {"type": BUSY}], "cannot be combined"),
    ],
)
def test_metric_lists_arc_rejects_are_rejected(metrics: list[dict[str, str]], message: str) -> None:
    with pytest.raises(MetricError, match=message):
        validate_metrics(metrics)


class FakeGitHub:
    def __init__(
        self, runners: list[Runner], runs: dict[str, list[WorkflowRun]], jobs: list[WorkflowJob]
    ) -> None:
        self.runners, self.runs, self.jobs = runners, runs, jobs
        self.job_calls = 0

    async def list_runners(self) -> list[Runner]:
        return self.runners

    async def list_workflow_runs(self, owner: str, repo: str, status: str) -> list[WorkflowRun]:
        return self.runs.get(status, [])

    async def list_workflow_jobs(self, owner: str, repo: str, run_id: int) -> list[WorkflowJob]:
        self.job_calls += 1
        return [j for j in self.jobs if j.run_id == run_id]


def _target(replicas: int, names: set[str]) -> ScaleTarget:
    return ScaleTarget(
        "RunnerDeployment",
        "rd",
        "ns",
        repository="acme/app",
        labels=("linux",),
        replicas=replicas,
        runner_names=frozenset(names),
    )


async def test_queued_and_in_progress_suggests_the_number_of_matching_jobs() -> None:
    gh = FakeGitHub(
        [],
        {
            "queued": [WorkflowRun(id=1, status="queued")],
            "in_progress": [
                WorkflowRun(id=2, status="in_progress"),
                WorkflowRun(id=0, status="queued"),
            ],
        },
        [
            WorkflowJob(id=10, run_id=1, status="queued", labels=["self-hosted", "linux"]),
            WorkflowJob(id=11, run_id=2, status="in_progress", labels=["linux"]),
            WorkflowJob(id=12, run_id=2, status="queued", labels=["gpu"]),
        ],
    )
    s = await suggest_replicas(gh, _target(1, set()), [{"type": QUEUED}])
    assert s.replicas == 2
    assert gh.job_calls == 2  # run id 0 is skipped


async def test_a_single_metric_at_zero_falls_back_to_min_replicas() -> None:
    gh = FakeGitHub([], {}, [])
    s = await suggest_replicas(gh, _target(1, set()), [{"type": QUEUED}])
    assert s.replicas is None


async def test_busy_at_zero_falls_back_to_the_second_metric_as_is() -> None:
    gh = FakeGitHub(
        [_runner("a", False)],
        {"queued": [WorkflowRun(id=1, status="queued")]},
        [WorkflowJob(id=10, run_id=1, status="queued", labels=["linux"])],
    )
    # 1 idle runner of 1: int(1 * 0.7) == 0 -> fallback counts 1 queued job
    s = await suggest_replicas(gh, _target(1, {"a"}), [{"type": BUSY}, {"type": QUEUED}])
    assert s.busy_desired == 0
    assert s.replicas == 1


async def test_no_metrics_means_min_replicas() -> None:
    s = await suggest_replicas(FakeGitHub([], {}, []), _target(3, set()), [])
    assert s.replicas is None
