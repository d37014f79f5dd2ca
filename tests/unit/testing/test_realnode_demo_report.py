"""The real-node demo's end-of-run lines for jobs left unfinished: each must say where the
job stands, so a job that waits for ever (a product bug) can be told apart from a slow one
and from a job given to a runner that is gone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from testworld.realnode_demo import unfinished_jobs
from testworld.sim.github.state import FakeGitHubState

REPO = "octo-org/octo-repo"


def test_each_unfinished_job_says_where_it_stands() -> None:
    state = FakeGitHubState()
    state.create_org("octo-org")
    state.create_repo(REPO)
    tenant = state.tenant_for("repo", REPO)
    gone = state.register_static_runner(tenant, "gone-runner", ["x"])
    alive = state.register_static_runner(tenant, "alive-runner", ["y"])
    queued = state.enqueue_job(REPO, ["z"])
    for runner, labels in ((gone, ["x"]), (alive, ["y"])):
        job = state.enqueue_job(REPO, labels)
        assert state.take_job(runner) is job
    state.runners.pop(gone.id)  # its registration vanished while it held the job
    done = state.enqueue_job(REPO, ["y"])
    done.status = "completed"

    lines = unfinished_jobs(cast(Any, SimpleNamespace(state=state)))

    assert len(lines) == 3, lines
    assert lines[0].startswith(f"job {queued.request_id} queued:")
    assert "runner gone-runner" in lines[1] and "no longer registered" in lines[1]
    assert "runner alive-runner" in lines[2] and lines[2].endswith(", registered)")
