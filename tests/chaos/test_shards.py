"""A sharded controller (``--shards``): replicas share the scale sets out, and a killed
replica's scale sets move to the survivors without a stranded job or a duplicate runner."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.shards import shard_kill, shard_spread

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_each_scale_set_is_served_by_the_replica_holding_its_shard(
    run_case: RunCase,
) -> None:
    result = await run_case(shard_spread, "chaos-shard-spread")
    sets = result.extra["scale_sets"]
    # One session per set, owned by the replica whose shard the set hashes to.
    assert result.extra["served_as_sharded"] == sets, result.extra
    assert result.extra["session_creates"] == sets, result.extra
    assert result.extra["replicas_serving"] == 2, result.extra
    assert result.runners_per_job <= 1.0, result.extra


@pytest.mark.relies_on("session-409")
async def test_a_killed_replicas_shards_move_to_the_survivors(run_case: RunCase) -> None:
    result = await run_case(shard_kill, "chaos-shard-kill")
    assert result.extra["shards_moved"] >= 1, result.extra
    # The Leases expire 15 s after the kill; a survivor takes each within a renew period.
    assert result.extra["shards_moved_s"] < 25, result.extra
    # The survivors resumed the dead replica's sessions: no set created a second one.
    assert result.extra["session_creates"] == result.extra["scale_sets"], result.extra
    assert result.runners_per_job <= 1.0, result.extra
