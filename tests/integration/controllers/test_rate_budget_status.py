"""G8 at the scale set: an exhausted GitHub quota is shown on the AutoscalingRunnerSet
(ScaleSetReady False, GitHubRateLimited) and waited for: nothing is sent until the reset,
then the scale set is created by itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _arsworld import running_world

from gharc.controllers.scaleset import conditions as cond

pytestmark = [pytest.mark.cluster]

RESET_IN = 10.0


def _ready(ars: dict[str, Any]) -> dict[str, Any]:
    found = cond.find((ars.get("status") or {}).get("conditions"), cond.SCALE_SET_READY)
    return dict(found) if found else {}


async def test_exhausted_quota_is_reported_and_waited_for(kubeconfig: str, namespace: str) -> None:
    async with running_world(kubeconfig, namespace) as w:
        w.gh.state.exhaust_rate_limit(w.gh.token, reset_in=RESET_IN)
        await w.create_ars("arc")
        ars = await w.wait_ars(
            lambda a: _ready(a).get("reason") == "GitHubRateLimited",
            timeout=RESET_IN / 2,
            message="GitHubRateLimited",
        )
        assert _ready(ars)["status"] == cond.FALSE
        refused = w.gh.calls(status=403)
        assert refused == 1, refused  # one 403 taught the budget the reset time
        await asyncio.sleep(RESET_IN / 3)
        assert w.gh.calls(status=403) == refused  # nothing retried before the reset
        ars = await w.wait_ars(
            lambda a: _ready(a).get("status") == cond.TRUE,
            timeout=RESET_IN + 20,
            message="ScaleSetReady True after the reset",
        )
        assert len(w.gh.state.scale_sets) == 1
        assert w.gh.calls(status=403) == refused
