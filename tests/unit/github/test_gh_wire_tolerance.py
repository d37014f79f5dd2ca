"""Parsing the Actions service's messages as its own (Go) clients do.

GitHub's clients (``actions/scaleset``, ARC's former ``github/actions`` client) decode with
``encoding/json``: unknown fields are ignored and a missing or ``null`` field is the zero
value. Since about July 2025 the service sends ``runnerRequestId: 0`` outside JobAvailable
(actions-service-api.md section 9). None of these may fail a message.
"""

from __future__ import annotations

import json
from typing import Any

from gharc.github.models import (
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
    parse_job_messages,
)


def _message(body: Any, **more: Any) -> dict[str, Any]:
    return {
        "messageId": 3,
        "messageType": "RunnerScaleSetJobMessages",
        "body": body if body is None or isinstance(body, str) else json.dumps(body),
        "statistics": {"totalAssignedJobs": 1},
        **more,
    }


def test_missing_runner_request_id_is_zero() -> None:
    jobs = parse_job_messages(json.dumps([{"messageType": "JobCompleted", "result": "succeeded"}]))
    assert len(jobs) == 1 and isinstance(jobs[0], JobCompleted)
    assert jobs[0].runner_request_id == 0 and jobs[0].result == "succeeded"


def test_runner_request_id_zero_outside_job_available() -> None:
    body = [
        {"messageType": "JobAssigned", "runnerRequestId": 0, "jobId": "a"},
        {"messageType": "JobStarted", "runnerRequestId": 0, "jobId": "a", "runnerName": "r"},
    ]
    jobs = parse_job_messages(json.dumps(body))
    assert [type(j) for j in jobs] == [JobAssigned, JobStarted]
    assert all(j.runner_request_id == 0 for j in jobs)


def test_null_fields_are_zero_values() -> None:
    body = [
        {
            "messageType": "JobAvailable",
            "runnerRequestId": 9,
            "jobWorkflowRef": None,
            "requestLabels": None,
            "repositoryName": None,
            "ownerName": None,
            "workflowRunId": None,
            "queueTime": None,
            "acquireJobUrl": None,
        }
    ]
    (job,) = parse_job_messages(json.dumps(body))
    assert isinstance(job, JobAvailable)
    assert job.job_workflow_ref == "" and job.request_labels == []
    assert job.repository_name == "" and job.workflow_run_id == 0 and job.queue_time is None


def test_null_body_is_an_empty_batch() -> None:
    msg = RunnerScaleSetMessage.from_wire(_message(None))
    assert msg.message_id == 3 and msg.jobs == [] and msg.malformed is None


def test_null_statistics_fields_are_zero() -> None:
    msg = RunnerScaleSetMessage.from_wire(
        _message([], statistics={"totalAssignedJobs": None, "totalRunningJobs": 2})
    )
    assert msg.statistics is not None
    assert msg.statistics.total_assigned_jobs == 0 and msg.statistics.total_running_jobs == 2


def test_unknown_fields_are_ignored() -> None:
    msg = RunnerScaleSetMessage.from_wire(
        _message(
            [{"messageType": "JobAssigned", "runnerRequestId": 1, "billingOwnerId": "x"}],
            someNewEnvelopeField={"a": 1},
        )
    )
    assert len(msg.of_type(JobAssigned)) == 1


def test_an_unparseable_job_is_skipped_not_the_batch() -> None:
    body = [
        {"messageType": "JobStarted", "runnerRequestId": 1, "queueTime": "not a time"},
        {"messageType": "JobAvailable", "runnerRequestId": 2},
        "not an object",
    ]
    msg = RunnerScaleSetMessage.from_wire(_message(body))
    assert [j.runner_request_id for j in msg.jobs] == [2]
    assert msg.skipped_jobs == 2 and msg.malformed is None


def test_an_unparseable_body_marks_the_message_malformed_but_keeps_its_id() -> None:
    for body in ("{not json", json.dumps({"a": 1})):
        msg = RunnerScaleSetMessage.from_wire(_message(body))
        assert msg.message_id == 3 and msg.jobs == []
        assert msg.malformed, body


def test_an_unusable_envelope_keeps_its_id() -> None:
    msg = RunnerScaleSetMessage.from_wire(_message([], statistics="lots"))
    assert msg.message_id == 3 and msg.malformed


def test_session_with_null_statistics_fields() -> None:
    s = RunnerScaleSetSession.model_validate(
        {
            "sessionId": "s",
            "ownerName": None,
            "messageQueueUrl": "http://127.0.0.1/q",
            "messageQueueAccessToken": "t",
            "statistics": None,
            "runnerScaleSet": None,
        }
    )
    assert s.statistics is None and s.owner_name is None
