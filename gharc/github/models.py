"""Wire models for the Actions service (camelCase) and GitHub REST (snake_case).

Models accept the field names GitHub sends (aliases) and Python names alike
(``populate_by_name``) and ignore unknown fields, so a new server field never breaks a
listener. ``model_dump(by_alias=True)`` gives the wire form back.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON body GitHub expects: camelCase, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class _Snake(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


# ---- Actions service -------------------------------------------------------------------


class Label(_Camel):
    name: str
    type: str = "System"


class RunnerSetting(_Camel):
    ephemeral: bool = True
    is_elastic: bool = True
    disable_update: bool = False


class RunnerScaleSetStatistic(_Camel):
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


class RunnerGroup(_Camel):
    id: int
    name: str
    size: int = 0
    is_default: bool = Field(
        default=False,
        validation_alias=AliasChoices("isDefaultGroup", "is_default"),
        serialization_alias="isDefaultGroup",
    )


class RunnerScaleSet(_Camel):
    id: int | None = None
    name: str | None = None
    runner_group_id: int | None = None
    runner_group_name: str | None = None
    labels: list[Label] = Field(default_factory=list)
    runner_setting: RunnerSetting | None = Field(
        default=None,
        validation_alias=AliasChoices("runnerSetting", "RunnerSetting", "runner_setting"),
        serialization_alias="runnerSetting",
    )
    created_on: datetime | None = None
    runner_jit_config_url: str | None = None
    statistics: RunnerScaleSetStatistic | None = None


class RunnerScaleSetSession(_Camel):
    session_id: str
    owner_name: str | None = None
    runner_scale_set: RunnerScaleSet | None = None
    message_queue_url: str
    message_queue_access_token: str = Field(repr=False)
    statistics: RunnerScaleSetStatistic | None = None


class RunnerReference(_Camel):
    id: int
    name: str
    runner_scale_set_id: int = 0


class RunnerScaleSetJitRunnerConfig(_Camel):
    runner: RunnerReference
    encoded_jit_config: str = Field(
        alias="encodedJITConfig",
        validation_alias=AliasChoices("encodedJITConfig", "encoded_jit_config"),
        repr=False,
    )


class _JobBase(_Camel):
    runner_request_id: int
    repository_name: str = ""
    owner_name: str = ""
    job_id: str = ""
    job_workflow_ref: str = ""
    job_display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    request_labels: list[str] = Field(default_factory=list)
    queue_time: datetime | None = None
    scale_set_assign_time: datetime | None = None
    runner_assign_time: datetime | None = None
    finish_time: datetime | None = None


class JobAvailable(_JobBase):
    message_type: Literal["JobAvailable"] = "JobAvailable"
    acquire_job_url: str = ""


class JobAssigned(_JobBase):
    message_type: Literal["JobAssigned"] = "JobAssigned"


class JobStarted(_JobBase):
    message_type: Literal["JobStarted"] = "JobStarted"
    runner_id: int = 0
    runner_name: str = ""


class JobCompleted(_JobBase):
    message_type: Literal["JobCompleted"] = "JobCompleted"
    result: str = ""
    runner_id: int = 0
    runner_name: str = ""


JobMessage = Annotated[
    JobAvailable | JobAssigned | JobStarted | JobCompleted, Field(discriminator="message_type")
]
_KNOWN_JOB_TYPES = {"JobAvailable", "JobAssigned", "JobStarted", "JobCompleted"}


class AcquirableJob(_Camel):
    runner_request_id: int
    acquire_job_url: str = ""
    message_type: str = ""
    repository_name: str = ""
    owner_name: str = ""
    job_workflow_ref: str = ""
    event_name: str = ""
    request_labels: list[str] = Field(default_factory=list)


class _JobMessageList(BaseModel):
    items: list[JobMessage]


def parse_job_messages(body: str) -> list[JobAvailable | JobAssigned | JobStarted | JobCompleted]:
    """Parse a message ``body`` (a JSON string holding an array of job messages).

    Unknown message types are skipped, as ARC does, so a new server-side type cannot stall
    the listener. Raises ``ValueError`` on malformed JSON.
    """
    if not body:
        return []
    raw = json.loads(body)
    if not isinstance(raw, list):
        raise ValueError("job message body is not a JSON array")
    known = [m for m in raw if isinstance(m, dict) and m.get("messageType") in _KNOWN_JOB_TYPES]
    return _JobMessageList.model_validate({"items": known}).items


class RunnerScaleSetMessage(_Camel):
    """One queue message; ``jobs`` is ``body`` parsed (see :func:`parse_job_messages`)."""

    message_id: int
    message_type: str = ""
    body: str = ""
    statistics: RunnerScaleSetStatistic | None = None
    jobs: list[JobMessage] = Field(default_factory=list, exclude=True)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> RunnerScaleSetMessage:
        msg = cls.model_validate(data)
        msg.jobs = (
            parse_job_messages(msg.body) if msg.message_type == "RunnerScaleSetJobMessages" else []
        )
        return msg

    def of_type(self, kind: type[_JobBase]) -> list[Any]:
        return [j for j in self.jobs if isinstance(j, kind)]


# ---- GitHub REST -----------------------------------------------------------------------


class RegistrationToken(_Snake):
    token: str = Field(repr=False)
    expires_at: datetime


class RunnerLabel(_Snake):
    id: int | None = None
    name: str
    type: str | None = None


class Runner(_Snake):
    """A self-hosted runner as REST ``list runners`` returns it."""

    id: int
    name: str
    os: str | None = None
    status: str = "offline"
    busy: bool = False
    labels: list[RunnerLabel] = Field(default_factory=list)
    runner_group_id: int | None = None
    ephemeral: bool | None = None


class RestRunnerGroup(_Snake):
    id: int
    name: str
    visibility: str | None = None
    default: bool = False
    inherited: bool = False
    allows_public_repositories: bool | None = None


class WorkflowRun(_Snake):
    id: int
    name: str | None = None
    status: str | None = None
    conclusion: str | None = None
    run_number: int | None = None
    event: str | None = None
    head_branch: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class WorkflowJob(_Snake):
    id: int
    run_id: int
    name: str | None = None
    status: str | None = None
    conclusion: str | None = None
    labels: list[str] = Field(default_factory=list)
    runner_id: int | None = None
    runner_name: str | None = None
    runner_group_id: int | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
