"""Wire models for the Actions service (camelCase) and GitHub REST (snake_case).

Models accept the field names GitHub sends (aliases) and Python names alike
(``populate_by_name``) and ignore unknown fields, so a new server field never breaks a
listener. ``model_dump(by_alias=True)`` gives the wire form back.

Actions service models read a missing or ``null`` field as its zero value (``0``, ``""``,
``[]``), as GitHub's own Go clients do with ``encoding/json``: the service leaves fields out
or sends ``null`` (``runnerRequestId`` is ``0`` outside JobAvailable since mid-2025), and a
client that rejects such a message stalls on it. A queue message whose body still cannot be
read is marked :attr:`RunnerScaleSetMessage.malformed`, keeping its id so that the listener
can delete it instead of having it redelivered forever.

Validation errors never repeat their input (``hide_input_in_errors``): a malformed answer
would otherwise put part of a queue token, JIT config or registration token into a log line,
an event or a status message.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

log = logging.getLogger("gharc.github.models")


class _Camel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", hide_input_in_errors=True
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_zero(cls, data: Any) -> Any:
        """``null`` means "not set": the field's default (its zero value) applies."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    def wire(self) -> dict[str, Any]:
        """The JSON body GitHub expects: camelCase, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class _Snake(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", hide_input_in_errors=True)


# ---- Actions service -------------------------------------------------------------------


class Label(_Camel):
    name: str
    type: str = "System"


class RunnerSetting(_Camel):
    """A scale set's runner settings. Sent: ``disableUpdate`` alone, as GitHub's current
    client (``actions/scaleset``) sends it; ``ephemeral`` and ``isElastic`` are only read
    (``None`` unless the service returns them), so they never reach a request body."""

    disable_update: bool = False
    ephemeral: bool | None = None
    is_elastic: bool | None = None


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
    runner_request_id: int = 0
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
    runner_request_id: int = 0
    acquire_job_url: str = ""
    message_type: str = ""
    repository_name: str = ""
    owner_name: str = ""
    job_workflow_ref: str = ""
    event_name: str = ""
    request_labels: list[str] = Field(default_factory=list)


_JOB_MESSAGE: TypeAdapter[JobAvailable | JobAssigned | JobStarted | JobCompleted] = TypeAdapter(
    JobMessage
)


def _job_list(body: str) -> list[Any]:
    """The raw items of a message ``body``; ``ValueError`` when it is not a JSON array."""
    raw = json.loads(body)
    if not isinstance(raw, list):
        raise ValueError("job message body is not a JSON array")
    return raw


def _parse_jobs(
    raw: list[Any],
) -> tuple[list[JobAvailable | JobAssigned | JobStarted | JobCompleted], list[str]]:
    """Each known job message parsed on its own; what could not be read, said in words.

    Unknown message types are skipped silently, as ARC does, so a new server-side type
    cannot stall the listener. One unreadable job costs only itself, not its batch.
    """
    jobs: list[JobAvailable | JobAssigned | JobStarted | JobCompleted] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(f"item {i} is a {type(item).__name__}, not an object")
            continue
        if item.get("messageType") not in _KNOWN_JOB_TYPES:
            continue
        try:
            jobs.append(_JOB_MESSAGE.validate_python(item))
        except ValidationError as err:
            problems.append(
                f"{item.get('messageType')} {item.get('runnerRequestId')!r}: {_first_error(err)}"
            )
    return jobs, problems


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
    where = ".".join(str(p) for p in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', '')}"


def parse_job_messages(body: str) -> list[JobAvailable | JobAssigned | JobStarted | JobCompleted]:
    """Parse a message ``body`` (a JSON string holding an array of job messages).

    Unknown message types and unreadable job messages are skipped (see :func:`_parse_jobs`).
    Raises ``ValueError`` when the body is not a JSON array.
    """
    if not body:
        return []
    return _parse_jobs(_job_list(body))[0]


class RunnerScaleSetMessage(_Camel):
    """One queue message; ``jobs`` is ``body`` parsed (see :func:`parse_job_messages`).

    ``malformed`` says why the message could not be read at all (then ``jobs`` is empty);
    ``skipped_jobs`` counts the job messages in its body that could not be read.
    """

    message_id: int = 0
    message_type: str = ""
    body: str = ""
    statistics: RunnerScaleSetStatistic | None = None
    jobs: list[JobMessage] = Field(default_factory=list, exclude=True)
    malformed: str | None = Field(default=None, exclude=True)
    skipped_jobs: int = Field(default=0, exclude=True)

    @classmethod
    def from_wire(cls, data: Any) -> RunnerScaleSetMessage:
        """Never raises for a JSON object: what cannot be read is reported, not thrown.

        Raises ``ValueError`` only when ``data`` is not an object (no message id to ack).
        """
        if not isinstance(data, dict):
            raise ValueError(f"a queue message must be a JSON object, not {type(data).__name__}")
        try:
            msg = cls.model_validate(data)
        except ValidationError as err:
            msg = cls(message_id=_lenient_int(data.get("messageId")))
            msg.message_type = str(data.get("messageType") or "")
            msg.malformed = f"message: {_first_error(err)}"
            return msg
        if msg.message_type != "RunnerScaleSetJobMessages" or not msg.body:
            return msg
        try:
            raw = _job_list(msg.body)
        except ValueError as err:
            msg.malformed = f"body: {err}"
            return msg
        msg.jobs, problems = _parse_jobs(raw)
        msg.skipped_jobs = len(problems)
        for problem in problems:
            log.warning("message %d: job message skipped: %s", msg.message_id, problem)
        return msg

    def of_type(self, kind: type[_JobBase]) -> list[Any]:
        return [j for j in self.jobs if isinstance(j, kind)]


def _lenient_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


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
