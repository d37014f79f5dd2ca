"""Token rotation: the credentials Secret gets a new PAT mid-burst and the old one is
revoked; listeners and runner registration move to the new token by themselves."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.cases import token_rotation

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_token_rotation_mid_burst(run_case: RunCase) -> None:
    result = await run_case(token_rotation, "chaos-token-rotation")
    assert result.extra["session_409s"] == 0, result.extra
    assert result.recover_seconds is not None
    assert result.recover_seconds < 60, result.extra
