"""The helm helper explains a missing helm instead of passing silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from testworld import helm as helm_mod


def test_a_bad_gharc_helm_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GHARC_HELM", str(tmp_path / "no-such-helm"))
    with pytest.raises(helm_mod.HelmUnavailable, match="not an executable"):
        helm_mod.find_helm()


def test_missing_helm_skips_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GHARC_HELM", str(tmp_path / "no-such-helm"))
    monkeypatch.delenv("GHARC_REQUIRE_HELM", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chart tests need helm"):
        helm_mod.helm_or_skip(tmp_path)


def test_required_helm_fails_instead_of_skipping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GHARC_HELM", str(tmp_path / "no-such-helm"))
    monkeypatch.setenv("GHARC_REQUIRE_HELM", "1")
    with pytest.raises(pytest.fail.Exception, match="helm is required"):
        helm_mod.helm_or_skip(tmp_path)
