"""Token rotation: the credentials Secret gets a new PAT mid-burst and the old one is
revoked; listeners and runner registration move to the new token by themselves."""

from __future__ import annotations

import pytest

from gharc.testing.chaos import CaseResult, problems
from gharc.testing.chaos.cases import token_rotation
from gharc.testing.worlds import WorldFactory

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_token_rotation_mid_burst(
    worlds: WorldFactory, chaos_results: list[CaseResult]
) -> None:
    result = await token_rotation(worlds, "chaos-token-rotation")
    chaos_results.append(result)
    assert not problems(result), (problems(result), result.extra)
    assert result.extra["session_409s"] == 0, result.extra
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
