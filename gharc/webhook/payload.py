"""Decoding and checking a delivery's body before anything acts on it.

A signed body can still be malformed (a proxy, a bug, a hand-made redelivery, a test): it
is answered 400 with the reason and changes nothing. JSON nested deeper than Python can
parse (100k levels) and fields of the wrong type (``labels: "linux"``) are reasons, not
crashes answered 500.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs


class PayloadError(ValueError):
    """The body is not a usable payload; the message says why (answered 400)."""


@dataclass(frozen=True)
class JobEvent:
    """The fields of a ``workflow_job`` delivery the server acts on."""

    action: str
    job_id: int
    labels: tuple[str, ...]
    conclusion: str | None
    runner_id: int | None
    owner: str
    owner_type: str
    repo: str
    enterprise: str


def decode(content_type: str, body: bytes) -> dict[str, Any]:
    """The JSON object of a delivery, for GitHub's two content types."""
    if content_type == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"))
        if "payload" not in form:
            raise PayloadError("form body without a payload field")
        raw: str | bytes = form["payload"][0]
    elif content_type in ("application/json", ""):
        raw = body
    else:
        raise PayloadError(f"unsupported content type {content_type!r}")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PayloadError(f"not JSON: {err}") from None
    except RecursionError:
        raise PayloadError("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise PayloadError("payload is not a JSON object")
    return data


def action_of(payload: Mapping[str, Any]) -> str:
    action = payload.get("action")
    if not isinstance(action, str):
        raise PayloadError("action must be a string")
    return action


def _obj(parent: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    value = parent.get(key)
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise PayloadError(f"{where}{key} must be an object")
    return value


def _str(parent: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> str:
    value = parent.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str) or (not optional and not value):
        raise PayloadError(f"{where}{key} must be a non-empty string")
    return value


def _int(parent: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> int | None:
    value = parent.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{where}{key} must be an integer")
    return value


def workflow_job(payload: Mapping[str, Any]) -> JobEvent:
    """The checked fields of a ``queued`` or ``completed`` workflow_job payload."""
    action = action_of(payload)
    job = _obj(payload, "workflow_job", "")
    repo = _obj(payload, "repository", "")
    owner = _obj(repo, "owner", "repository.")
    enterprise = _obj(payload, "enterprise", "", optional=True)
    labels = job.get("labels")
    if labels is None:
        labels = []
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise PayloadError("workflow_job.labels must be a list of strings")
    job_id = _int(job, "id", "workflow_job.")
    assert job_id is not None
    conclusion = job.get("conclusion")
    if conclusion is not None and not isinstance(conclusion, str):
        raise PayloadError("workflow_job.conclusion must be a string or null")
    return JobEvent(
        action=action,
        job_id=job_id,
        labels=tuple(labels),
        conclusion=conclusion,
        runner_id=_int(job, "runner_id", "workflow_job.", optional=True),
        owner=_str(owner, "login", "repository.owner."),
        owner_type=_str(owner, "type", "repository.owner.", optional=True),
        repo=_str(repo, "name", "repository."),
        enterprise=_str(enterprise, "slug", "enterprise.", optional=True),
    )
