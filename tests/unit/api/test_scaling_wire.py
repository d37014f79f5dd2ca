"""B3's wire: what one side writes is what the other side reads."""

from __future__ import annotations

from gharc.api.scaleset import scaling_wire as wire
from gharc.api.scaleset.views import EphemeralRunnerSetView


def test_the_set_reads_the_listeners_patch_and_the_listener_reads_the_sets_marker() -> None:
    spec = wire.replicas_patch(3, 7)["spec"]
    status = wire.cleanup_marker_status(7, {"currentReplicas": 2})["status"]
    view = EphemeralRunnerSetView({"metadata": {"name": "s"}, "spec": spec, "status": status})
    assert (view.replicas, view.patch_id, view.cleanup_marker) == (3, 7, 7)
    assert status["currentReplicas"] == 2


def test_the_marker_write_is_conditioned_on_the_patch_it_read() -> None:
    ops = wire.cleanup_marker_ops(9, 7, {"runningEphemeralRunners": 1})
    assert ops[0] == {"op": "test", "path": "/spec/patchID", "value": 9}
    assert {"op": "add", "path": "/status/finishedRunnerCleanupPatchID", "value": 7} in ops
    assert {"op": "add", "path": "/status/runningEphemeralRunners", "value": 1} in ops


def test_the_guarded_decision_is_conditioned_on_the_marker_it_knew() -> None:
    ops = wire.replicas_after_marker_ops(4, 12, 7)
    assert ops[0] == {"op": "test", "path": "/status/finishedRunnerCleanupPatchID", "value": 7}
    spec = {op["path"].removeprefix("/spec/"): op["value"] for op in ops[1:]}
    assert spec == wire.replicas_patch(4, 12)["spec"]
