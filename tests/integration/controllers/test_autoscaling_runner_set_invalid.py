"""An invalid AutoscalingRunnerSet is reported in status and events, without a hot loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _arsworld import SECRET_NAME, running_world

from gharc.api.resources import AUTOSCALING_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.autoscalingrunnerset import AutoscalingRunnerSetReconciler
from gharc.kube.reconcile import Request, Result
from testworld.wait import eventually


@pytest.fixture
def reconcile_count(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts ARS reconciles per object name."""
    counts: dict[str, int] = {}
    original = AutoscalingRunnerSetReconciler.reconcile

    async def counting(self: Any, request: Request) -> Result | None:
        counts[request.name] = counts.get(request.name, 0) + 1
        return await original(self, request)

    monkeypatch.setattr(AutoscalingRunnerSetReconciler, "reconcile", counting)
    return counts


@pytest.mark.parametrize(
    ("spec", "reason", "fragment"),
    [
        ({"githubConfigSecret": "no-such-secret"}, "MissingGitHubConfigSecret", "no-such-secret"),
        # isURL() admits it, but it names neither an org, a repo nor an enterprise.
        ({"githubConfigUrl": "https://github.com/a/b/c"}, "InvalidGitHubConfigUrl", "a/b/c"),
    ],
    ids=["missing-secret", "bad-url"],
)
async def test_invalid_spec_is_reported_once_and_not_retried_hot(
    kubeconfig: str,
    namespace: str,
    reconcile_count: dict[str, int],
    spec: dict[str, Any],
    reason: str,
    fragment: str,
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc", **spec)
        ars = await w.wait_ars(
            lambda a: (a.get("status") or {}).get("phase") == c.PHASE_FAILED,
            message="ARS Failed",
        )
        assert reason in ars["status"]["message"] and fragment in ars["status"]["message"]
        event = await w.wait_event(reason)
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == "arc"

        settled = reconcile_count.get("arc", 0)
        await asyncio.sleep(3.0)
        # At most the one reconcile our own status write triggers; a hot loop makes dozens.
        assert reconcile_count["arc"] - settled <= 1, reconcile_count
        assert reconcile_count["arc"] <= 5, reconcile_count
        assert w.gh.state.scale_sets == {}
        assert await w.ers() is None

        # Fixing the spec is the change that brings it back.
        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS,
            "arc",
            {"spec": {"githubConfigSecret": SECRET_NAME, "githubConfigUrl": w.gh.config_url()}},
            namespace=namespace,
        )
        fixed = await w.wait_ars(
            lambda a: (a.get("status") or {}).get("phase") == c.PHASE_PENDING,
            message="ARS recovers",
        )
        assert not fixed["status"].get("message")
        assert len(w.gh.state.scale_sets) == 1


@pytest.mark.parametrize(
    ("name", "spec", "reason"),
    [
        ("n" * 47, {}, "InvalidName"),
        ("arc", {"minRunners": 5, "maxRunners": 2}, "InvalidSpec"),
        ("arc", {"githubConfigSecret": ""}, "InvalidSpec"),
        ("arc", {"runnerScaleSetLabels": ["ok", ""]}, "InvalidSpec"),
        ("arc", {"vaultConfig": {"type": "hashicorp"}}, "InvalidSpec"),
    ],
    ids=["name-47", "min-gt-max", "empty-secret", "empty-label", "vault-type"],
)
async def test_what_the_crd_accepts_but_cannot_work_is_failed_and_deletable(
    kubeconfig: str, namespace: str, name: str, spec: dict[str, Any], reason: str
) -> None:
    """ARC's CRD accepted these, so gharc's does too; the reconciler says what is wrong."""
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars(name, **spec)
        ars = await w.wait_ars(
            lambda a: (a.get("status") or {}).get("phase") == c.PHASE_FAILED,
            name=name,
            message="ARS Failed",
        )
        assert ars["status"]["message"].startswith(reason), ars["status"]["message"]
        event = await w.wait_event(reason)
        assert event["type"] == "Warning"
        assert w.gh.state.scale_sets == {}
        assert c.FINALIZER_AUTOSCALING_RUNNER_SET in ars["metadata"]["finalizers"]

        await w.kube.delete(AUTOSCALING_RUNNER_SETS, ars)

        async def gone() -> bool:
            return await w.get_or_none(AUTOSCALING_RUNNER_SETS, name) is None

        await eventually(gone, timeout=20, message="ARS deleted")
