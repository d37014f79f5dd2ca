"""Set-up shared by the benchmarks that run one pod-mode listener process.

Both need the same world: a scale set in the fake GitHub, its EphemeralRunnerSet's runner
spec and the listener's ``config.json``; written once so they measure the same thing.
"""

from __future__ import annotations

from typing import Any

from testworld.sim.github import DEFAULT_ORG, FakeGitHubServer

ERS = "bench-ers"
SET = "bench-set"


def scale_set_world(
    gh: FakeGitHubServer, namespace: str, max_runners: int
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Create the scale set ``SET`` in ``gh``; return it, the ``ephemeralRunnerSpec`` of the
    ERS ``ERS`` in ``namespace`` and the config of a listener for it (errors-only logging)."""
    tenant = gh.state.tenant_for("org", DEFAULT_ORG)
    ss = gh.state.create_scale_set(tenant, {"name": SET, "runnerGroupId": 1})
    runner_spec = {
        "githubConfigUrl": gh.config_url(DEFAULT_ORG),
        "githubConfigSecret": "s",
        "runnerScaleSetId": ss.id,
        "spec": {"containers": [{"name": "runner", "image": "runner"}]},
    }
    config = {
        "configure_url": gh.config_url(DEFAULT_ORG),
        "github_token": gh.token,
        "ephemeral_runner_set_namespace": namespace,
        "ephemeral_runner_set_name": ERS,
        "runner_scale_set_id": ss.id,
        "min_runners": 0,
        "max_runners": max_runners,
        "log_level": "error",
    }
    return ss, runner_spec, config
