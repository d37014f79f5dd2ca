"""A scale set deleted at GitHub behind the controller's back is created again (ARC #3942's
neighbour: the listener's session creation answers 404 RunnerScaleSetNotFound, and this
time GET of the scale set by id says 404 too). The listener backs off; the
AutoscalingRunnerSet controller, seeing its listener fail, checks the scale set by id,
creates it again and moves the listener to the new id, with no human involved.
"""

from __future__ import annotations

import pytest
from _arsworld import running_world

from gharc.api.scaleset import constants as c
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


def _scale_set_id(ars: dict[str, object]) -> str | None:
    meta = ars.get("metadata") or {}
    assert isinstance(meta, dict)
    return (meta.get("annotations") or {}).get(c.ANNOTATION_RUNNER_SCALE_SET_ID)


async def test_scale_set_deleted_at_github_is_created_again(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace, listener_mode="InProcess") as w:
        await w.create_ars("arc", runnerScaleSetLabels=["linux", "arc"])
        ars = await w.wait_ars(lambda a: _scale_set_id(a) is not None, message="scale set id")
        old = int(str(_scale_set_id(ars)))

        async def session_of(ss_id: int) -> bool:
            return any(s.scale_set_id == ss_id for s in w.gh.state.sessions.values())

        await eventually(lambda: session_of(old), timeout=30, message="the listener's session")
        w.gh.state.delete_scale_set(old)

        ars = await w.wait_ars(
            lambda a: _scale_set_id(a) not in (None, str(old)),
            timeout=60,
            message="a new scale set id",
        )
        new = int(str(_scale_set_id(ars)))
        assert w.gh.state.scale_sets[new].name == "arc"
        assert [ss.id for ss in w.gh.state.scale_sets.values()] == [new]
        await eventually(lambda: session_of(new), timeout=60, message="listener on the new id")
        ers = await w.ers()
        assert ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == new
