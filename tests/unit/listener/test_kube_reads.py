"""The listener reads its EphemeralRunnerSet's patch ID and cleanup marker as the controller
that writes them does (EphemeralRunnerSetView): a marker of ``"3"`` is patch 3 to both, so
the listener answers the cleanup the controller waits on instead of ignoring it."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.api.scaleset.views import EphemeralRunnerSetView
from gharc.listener.runnerset_writes import KubePatcher, marker_of


def _runner_set(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "ers", "namespace": "ns"}, "spec": spec, "status": status}


@pytest.mark.parametrize(("value", "read"), [(3, 3), ("3", 3), ("x", None), (None, None)])
def test_the_cleanup_marker_is_read_as_the_controller_reads_it(
    value: Any, read: int | None
) -> None:
    obj = _runner_set({}, {} if value is None else {"finishedRunnerCleanupPatchID": value})
    assert marker_of(obj) == read == EphemeralRunnerSetView(obj).cleanup_marker


class _Kube:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    async def get(self, resource: Any, name: str, *, namespace: str) -> dict[str, Any]:
        return self.obj


@pytest.mark.parametrize(("value", "read"), [(41, 41), ("41", 41), ("x", 0), (None, 0)])
async def test_the_current_patch_id_is_read_as_the_controller_reads_it(
    value: Any, read: int
) -> None:
    obj = _runner_set({} if value is None else {"patchID": value}, {})
    patcher = KubePatcher.__new__(KubePatcher)
    patcher.kube = _Kube(obj)  # type: ignore[assignment]
    patcher.namespace, patcher.runner_set_name = "ns", "ers"
    assert await patcher.current_patch_id() == read == EphemeralRunnerSetView(obj).patch_id
