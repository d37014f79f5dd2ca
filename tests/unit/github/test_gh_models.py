from __future__ import annotations

import json

import pytest

from gharc.github.models import (
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    Label,
    RunnerScaleSet,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
    RunnerSetting,
    parse_job_messages,
)

BASE = {
    "runnerRequestId": 7,
    "repositoryName": "app",
    "ownerName": "acme",
    "jobId": "j-1",
    "jobWorkflowRef": "acme/app/.github/workflows/ci.yml@refs/heads/main",
    "jobDisplayName": "build",
    "workflowRunId": 99,
    "eventName": "push",
    "requestLabels": ["arc"],
    "queueTime": "2024-01-01T00:00:00Z",
    "scaleSetAssignTime": "0001-01-01T00:00:00Z",
    "runnerAssignTime": "0001-01-01T00:00:00Z",
    "finishTime": "0001-01-01T00:00:00Z",
}


def test_parse_job_messages_all_types() -> None:
    body = json.dumps(
        [
            {**BASE, "messageType": "JobAvailable", "acquireJobUrl": "http://x/acquire"},
            {**BASE, "messageType": "JobAssigned"},
            {**BASE, "messageType": "JobStarted", "runnerId": 3, "runnerName": "r-3"},
            {
                **BASE,
                "messageType": "JobCompleted",
                "result": "failed",
                "runnerId": 3,
                "runnerName": "r-3",
            },
            {**BASE, "messageType": "SomethingNew"},
        ]
    )
    jobs = parse_job_messages(body)
    assert [type(j) for j in jobs] == [JobAvailable, JobAssigned, JobStarted, JobCompleted]
    avail, _assigned, started, completed = jobs
    assert isinstance(avail, JobAvailable) and avail.acquire_job_url == "http://x/acquire"
    assert isinstance(started, JobStarted) and started.runner_name == "r-3"
    assert isinstance(completed, JobCompleted) and completed.result == "failed"
    assert completed.workflow_run_id == 99 and completed.request_labels == ["arc"]
    assert completed.queue_time is not None and completed.queue_time.year == 2024


@pytest.mark.parametrize("body", ["{not json", '{"a": 1}'])
def test_parse_job_messages_malformed(body: str) -> None:
    with pytest.raises(ValueError):
        parse_job_messages(body)


def test_message_from_wire() -> None:
    msg = RunnerScaleSetMessage.from_wire(
        {
            "messageId": 5,
            "messageType": "RunnerScaleSetJobMessages",
            "body": json.dumps([{**BASE, "messageType": "JobAssigned"}]),
            "statistics": {"totalAssignedJobs": 2, "totalAvailableJobs": 1},
        }
    )
    assert msg.message_id == 5 and msg.statistics is not None
    assert msg.statistics.total_assigned_jobs == 2
    assert len(msg.of_type(JobAssigned)) == 1


def test_scale_set_wire_is_camel_case() -> None:
    rss = RunnerScaleSet(
        name="arc",
        runner_group_id=1,
        labels=[Label(name="arc")],
        runner_setting=RunnerSetting(disable_update=True),
    )
    wire = rss.wire()
    assert wire == {
        "name": "arc",
        "runnerGroupId": 1,
        "labels": [{"name": "arc", "type": "System"}],
        "runnerSetting": {"disableUpdate": True},
    }
    back = RunnerScaleSet.model_validate({**wire, "RunnerSetting": wire.pop("runnerSetting")})
    assert back.runner_setting is not None and back.runner_setting.disable_update


def test_session_token_not_in_repr() -> None:
    s = RunnerScaleSetSession.model_validate(
        {
            "sessionId": "s",
            "messageQueueUrl": "http://q",
            "messageQueueAccessToken": "qsecret",
        }
    )
    assert "qsecret" not in repr(s)
