"""The client core knows Kubernetes' kinds; gharc's own are declared and registered by
gharc.api, so the core can serve another application's kinds the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from gharc.api import resources as app
from gharc.api.legacy import constants as lc
from gharc.api.scaleset import constants as sc
from gharc.kube import resources


def test_the_core_names_no_api_group_of_gharc() -> None:
    text = Path(resources.__file__).read_text(encoding="utf-8")
    assert sc.GROUP not in text and lc.GROUP not in text


def test_registered_kinds_are_found_by_api_version_and_kind() -> None:
    assert resources.resource_for(sc.API_VERSION, "EphemeralRunner") is app.EPHEMERAL_RUNNERS
    assert resources.resource_for(lc.API_VERSION, "Runner") is app.RUNNERS
    assert resources.resource_for("v1", "Pod") is resources.PODS
    assert app.HORIZONTAL_RUNNER_AUTOSCALERS.path(namespace="ns") == (
        f"/apis/{lc.API_VERSION}/namespaces/ns/horizontalrunnerautoscalers"
    )
    with pytest.raises(KeyError):
        resources.resource_for("example.com/v1", "Unknown")
