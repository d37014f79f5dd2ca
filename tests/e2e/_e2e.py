"""Helpers of the end-to-end tests: confined Worlds, waiting, jobs and their report.

Everything but the namespace naming lives in :mod:`testworld.worlds` (the chaos suite
and ``bench/chaos.py`` use it too); it is re-exported here for the e2e tests."""

from __future__ import annotations

import uuid

import pytest

from testworld.worlds import (
    REPO,
    WorldFactory,
    all_completed,
    enqueue_jobs,
    job_state,
    listener_pods,
    report,
    runner_leftovers,
    scale_set_id,
    wait_until,
)

__all__ = [
    "REPO",
    "WorldFactory",
    "all_completed",
    "enqueue_jobs",
    "job_state",
    "listener_pods",
    "report",
    "runner_leftovers",
    "scale_set_id",
    "unique_namespace",
    "wait_until",
]


def unique_namespace(request: pytest.FixtureRequest, prefix: str = "e2e") -> str:
    base = request.node.name.lower().replace("_", "-")
    base = "".join(ch for ch in base if ch.isalnum() or ch == "-").strip("-")
    base = base.removeprefix("test-")[:30].strip("-")
    return f"{prefix}-{base}-{uuid.uuid4().hex[:5]}"
