"""A lost runner pod whose runner had redeemed its single-use JIT config (ARC #4588: a
zombie for 64 minutes): the runner registers afresh instead of sitting refused."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.incidents import used_jit_config

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_used_jit_config_is_replaced(run_case: RunCase) -> None:
    result = await run_case(used_jit_config, "chaos-used-jit-config")
    assert "error" not in result.extra, result.extra
    assert result.runners_per_job <= 1.05, result
    # The loss is seen at once (the pod's delete event); a new registration and pod follow.
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
    assert result.extra["victim_jobs"] >= 1, result.extra  # the re-registered runner works
