"""Node loss: the node of every runner pod dies mid-burst (Ready Unknown, pods left Running);
after --node-loss-timeout the runners are replaced on a live node and every job gets one."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.cases import node_loss

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_node_loss_mid_burst(run_case: RunCase) -> None:
    result = await run_case(node_loss, "chaos-node-loss")
    print(
        f"node loss: recovered in {result.recover_seconds} s, {result.runners_created} "
        f"runners for {result.submitted} jobs, {result.orphans} orphans, {result.extra}"
    )
    assert result.extra["pods_lost"] > 0, result.extra
    assert result.runners_per_job <= 1.05, result.runners_created
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
