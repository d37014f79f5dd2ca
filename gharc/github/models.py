"""Wire models for the Actions service (camelCase) and GitHub REST (snake_case).

Models accept the field names GitHub sends (aliases) and Python names alike and ignore
unknown fields, so a new server field never breaks a listener. ``wire()`` (and
``model_dump(by_alias=True)``) gives the wire form back. They are plain dataclasses read by
:mod:`gharc.github.datamodel`, not pydantic models: a pod-mode listener parses these and
nothing else, and pydantic cost it about 12 MiB of RSS.

Actions service models read a missing or ``null`` field as its zero value (``0``, ``""``,
``[]``), as GitHub's own Go clients do with ``encoding/json``: the service leaves fields out
or sends ``null`` (``runnerRequestId`` is ``0`` outside JobAvailable since mid-2025), and a
client that rejects such a message stalls on it. A queue message whose body still cannot be
read is marked :attr:`RunnerScaleSetMessage.malformed`, keeping its id so that the listener
can delete it instead of having it redelivered forever.

Validation errors never repeat their input: a malformed answer would otherwise put part of
a queue token, JIT config or registration token into a log line, an event or a status
message.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from gharc.github.datamodel import DataModel, Rule, ValidationError, to_camel

log = logging.getLogger("gharc.github.models")


class _Camel(DataModel):
    ALIAS = to_camel
    NULL_IS_DEFAULT = True  # ``null`` means "not set": the field's default (its zero value)

    def wire(self) -> dict[str, Any]:
        """The JSON body GitHub expects: camelCase, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


class _Snake(DataModel):
    pass


# ---- Actions service -------------------------------------------------------------------


@dataclass(kw_only=True)
class Label(_Camel):
    name: str
    type: str = "System"


@dataclass(kw_only=True)
class RunnerSetting(_Camel):
    """A scale set's runner settings. Sent: ``disableUpdate`` alone, as GitHub's current
    client (``actions/scaleset``) sends it; ``ephemeral`` and ``isElastic`` are only read
    (``None`` unless the service returns them), so they never reach a request body."""

    disable_update: bool = False
    ephemeral: bool | None = None
    is_elastic: bool | None = None


@dataclass(kw_only=True)
class RunnerScaleSetStatistic(_Camel):
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


@dataclass(kw_only=True)
class RunnerGroup(_Camel):
    id: int
    name: str
    size: int = 0
    is_default: bool = field(default=False, metadata=Rule(alias="isDefaultGroup").meta)


@dataclass(kw_only=True)
class RunnerScaleSet(_Camel):
    id: int | None = None
    name: str | None = None
    runner_group_id: int | None = None
    runner_group_name: str | None = None
    labels: list[Label] = field(default_factory=list)
    runner_setting: RunnerSetting | None = field(
        default=None, metadata=Rule(also=("RunnerSetting",)).meta
    )
    created_on: datetime | None = None
    runner_jit_config_url: str | None = None
    statistics: RunnerScaleSetStatistic | None = None


@dataclass(kw_only=True)
class RunnerScaleSetSession(_Camel):
    session_id: str
    owner_name: str | None = None
    runner_scale_set: RunnerScaleSet | None = None
    message_queue_url: str
    message_queue_access_token: str = field(repr=False)
    statistics: RunnerScaleSetStatistic | None = None


@dataclass(kw_only=True)
class RunnerReference(_Camel):
    id: int
    name: str
    runner_scale_set_id: int = 0
    status: str = ""
    """``online`` while a runner process holds the registration (the agents API's); empty
    where the answer carries none (a JIT config's)."""


@dataclass(kw_only=True)
class RunnerScaleSetJitRunnerConfig(_Camel):
    runner: RunnerReference
    encoded_jit_config: str = field(repr=False, metadata=Rule(alias="encodedJITConfig").meta)


@dataclass(kw_only=True)
class _JobBase(_Camel):
    runner_request_id: int = 0
    repository_name: str = ""
    owner_name: str = ""
    job_id: str = ""
    job_workflow_ref: str = ""
    job_display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    request_labels: list[str] = field(default_factory=list)
    queue_time: datetime | None = None
    scale_set_assign_time: datetime | None = None
    runner_assign_time: datetime | None = None
    finish_time: datetime | None = None


@dataclass(kw_only=True)
class JobAvailable(_JobBase):
    message_type: Literal["JobAvailable"] = "JobAvailable"
    acquire_job_url: str = ""


@dataclass(kw_only=True)
class JobAssigned(_JobBase):
    message_type: Literal["JobAssigned"] = "JobAssigned"


@dataclass(kw_only=True)
class JobStarted(_JobBase):
    message_type: Literal["JobStarted"] = "JobStarted"
    runner_id: int = 0
    runner_name: str = ""


@dataclass(kw_only=True)
class JobCompleted(_JobBase):
    message_type: Literal["JobCompleted"] = "JobCompleted"
    result: str = ""
    runner_id: int = 0
    runner_name: str = ""


JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted
_JOB_TYPES: dict[str, type[JobAvailable | JobAssigned | JobStarted | JobCompleted]] = {
    "JobAvailable": JobAvailable,
    "JobAssigned": JobAssigned,
    "JobStarted": JobStarted,
    "JobCompleted": JobCompleted,
}


@dataclass(kw_only=True)
class AcquirableJob(_Camel):
    runner_request_id: int = 0
    acquire_job_url: str = ""
    message_type: str = ""
    repository_name: str = ""
    owner_name: str = ""
    job_workflow_ref: str = ""
    event_name: str = ""
    request_labels: list[str] = field(default_factory=list)


def _job_list(body: str) -> list[Any]:
    """The raw items of a message ``body``; ``ValueError`` when it is not a JSON array."""
    raw = json.loads(body)
    if not isinstance(raw, list):
        raise ValueError("job message body is not a JSON array")
    return raw


def _parse_jobs(raw: list[Any]) -> tuple[list[JobMessage], list[str]]:
    """Each known job message parsed on its own; what could not be read, said in words.

    Unknown message types are skipped silently, as ARC does, so a new server-side type
    cannot stall the listener. One unreadable job costs only itself, not its batch.
    """
    jobs: list[JobMessage] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(f"item {i} is a {type(item).__name__}, not an object")
            continue
        kind = _JOB_TYPES.get(item.get("messageType"))  # type: ignore[arg-type]
        if kind is None:
            continue
        try:
            jobs.append(kind.model_validate(item))
        except ValidationError as err:
            problems.append(
                f"{item.get('messageType')} {item.get('runnerRequestId')!r}: {_first_error(err)}"
            )
    return jobs, problems


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
    where = ".".join(str(p) for p in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', '')}"


def parse_job_messages(body: str) -> list[JobMessage]:
    """Parse a message ``body`` (a JSON string holding an array of job messages).

    Unknown message types and unreadable job messages are skipped (see :func:`_parse_jobs`).
    Raises ``ValueError`` when the body is not a JSON array.
    """
    if not body:
        return []
    return _parse_jobs(_job_list(body))[0]


_STATE = Rule(internal=True).meta
"""Fields the listener sets after reading a message: never read from it nor sent."""


@dataclass(kw_only=True)
class RunnerScaleSetMessage(_Camel):
    """One queue message; ``jobs`` is ``body`` parsed (see :func:`parse_job_messages`).

    ``malformed`` says why the message could not be read at all (then ``jobs`` is empty);
    ``skipped_jobs`` counts the job messages in its body that could not be read.
    """

    message_id: int = 0
    message_type: str = ""
    body: str = ""
    statistics: RunnerScaleSetStatistic | None = None
    jobs: list[JobMessage] = field(default_factory=list, metadata=_STATE)
    malformed: str | None = field(default=None, metadata=_STATE)
    skipped_jobs: int = field(default=0, metadata=_STATE)

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


@dataclass(kw_only=True)
class RegistrationToken(_Snake):
    token: str = field(repr=False)
    expires_at: datetime


@dataclass(kw_only=True)
class RunnerLabel(_Snake):
    id: int | None = None
    name: str
    type: str | None = None


@dataclass(kw_only=True)
class Runner(_Snake):
    """A self-hosted runner as REST ``list runners`` returns it."""

    id: int
    name: str
    os: str | None = None
    status: str = "offline"
    busy: bool = False
    labels: list[RunnerLabel] = field(default_factory=list)
    runner_group_id: int | None = None
    ephemeral: bool | None = None


@dataclass(kw_only=True)
class RestRunnerGroup(_Snake):
    id: int
    name: str
    visibility: str | None = None
    default: bool = False
    inherited: bool = False
    allows_public_repositories: bool | None = None


@dataclass(kw_only=True)
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


@dataclass(kw_only=True)
class WorkflowJob(_Snake):
    id: int
    run_id: int
    name: str | None = None
    status: str | None = None
    conclusion: str | None = None
    labels: list[str] = field(default_factory=list)
    runner_id: int | None = None
    runner_name: str | None = None
    runner_group_id: int | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
