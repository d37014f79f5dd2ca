"""Revoked credentials: one of two in-process listeners loses its PAT; it backs off (no
crash loop), the other keeps its pace, and it recovers by itself once the PAT is back."""

from __future__ import annotations

import pytest
from _chaos import RunCase

from testworld.chaos.cases import revoked_credentials

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


async def test_revoked_credentials_back_off_and_recover(run_case: RunCase) -> None:
    result = await run_case(revoked_credentials, "chaos-revoked-credentials")
    extra = result.extra
    assert "error" not in extra, extra
    assert "BackOff" in extra["bad_phases"], extra
    failures = extra["bad_failures"]
    assert failures == sorted(failures) and failures[-1] >= 3, extra
    # B1's ladder (5, 10, 20 s) paces the attempts: a few PAT exchanges, not a storm.
    assert extra["bad_pat_401s"] <= 4 * failures[-1] + 4, extra
    assert extra["bad_jobs_run_while_revoked"] == 0, extra
    # The healthy scale set keeps its pace (a generous bound for a loaded machine).
    before, during = extra["healthy_p50_before_s"], extra["healthy_p50_during_s"]
    assert before is not None and during is not None
    assert during <= max(3 * before, before + 10), extra
    assert result.recover_seconds is not None
