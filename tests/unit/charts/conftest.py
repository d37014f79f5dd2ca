"""The ``helm`` fixture: a real helm from ``scripts/testbins helm``, or a skip saying why."""

from __future__ import annotations

import pytest

from testworld.helm import Helm, helm_or_skip


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Built once per machine (about 4 minutes), then cached; isolated HELM_* homes."""
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))
