"""Behaviours B4: spec changes propagate exactly once, and the phase tells the truth."""

from __future__ import annotations

import asyncio
from typing import Any

from _arsworld import World, runner_template, running_world

from gharc.api.resources import AUTOSCALING_LISTENERS, AUTOSCALING_RUNNER_SETS
from gharc.api.scaleset import constants as c
from testworld.wait import eventually

TEST_FINALIZER = "tests.gharc.dev/hold"


async def _running(w: World, **spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """An ARS whose listener runs: returns (ars, listener)."""
    ars = await w.create_ars("arc", **spec)
    pod = await w.wait_listener_pod(ars)
    await w.run_listener(pod)
    ars = await w.wait_ars(
        lambda a: (
            (a.get("status") or {}).get("phase") == c.PHASE_RUNNING
            and a["status"].get("observedGeneration") == a["metadata"]["generation"]
        ),
        message="ARS Running",
    )
    listener = await w.listener(ars)
    assert listener is not None
    return ars, listener


def _observed(ars: dict[str, Any]) -> bool:
    status = ars.get("status") or {}
    return bool(status.get("observedGeneration") == ars["metadata"]["generation"])


async def _patch_spec(w: World, spec: dict[str, Any]) -> dict[str, Any]:
    return await w.kube.merge_patch(
        AUTOSCALING_RUNNER_SETS, "arc", {"spec": spec}, namespace=w.namespace
    )


async def test_template_change_patches_runner_set_in_place_once_and_keeps_listener(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars, listener = await _running(w)
        ers = await w.ers()
        assert ers is not None
        revision = int(ers["spec"].get("actionableRevision") or 0)

        patched = await _patch_spec(w, {"template": runner_template(image="runner:2")})
        ars = await w.wait_ars(
            lambda a: (
                a["metadata"]["generation"] == patched["metadata"]["generation"] and _observed(a)
            ),
            message="template change observed",
        )
        ers_after = await w.ers()
        assert ers_after is not None
        assert ers_after["metadata"]["uid"] == ers["metadata"]["uid"]  # in place
        runner_spec = ers_after["spec"]["ephemeralRunnerSpec"]
        assert runner_spec["spec"]["containers"][0]["image"] == "runner:2"
        assert ers_after["spec"]["actionableRevision"] == revision + 1
        still = await w.listener(ars)
        assert still is not None
        assert still["metadata"]["uid"] == listener["metadata"]["uid"]
        assert not still["metadata"].get("deletionTimestamp")
        assert ars["status"]["phase"] == c.PHASE_RUNNING

        # An explicit empty list means the same template: no second revision bump.
        patched = await _patch_spec(w, {"template": runner_template(image="runner:2", env=[])})
        await w.wait_ars(
            lambda a: (
                a["metadata"]["generation"] == patched["metadata"]["generation"] and _observed(a)
            ),
            message="env: [] observed",
        )
        await asyncio.sleep(1.0)  # let any (wrong) follow-up reconcile happen
        ers_final = await w.ers()
        assert ers_final is not None
        assert ers_final["spec"]["actionableRevision"] == revision + 1


async def test_max_runners_change_recreates_listener_and_is_pending_until_it_runs(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars, listener = await _running(w)
        ers = await w.ers()
        assert ers is not None
        old_uid = listener["metadata"]["uid"]
        # Hold the old listener's deletion, so the half-applied state can be observed.
        await w.kube.merge_patch(
            AUTOSCALING_LISTENERS,
            listener,
            {"metadata": {"finalizers": [*listener["metadata"]["finalizers"], TEST_FINALIZER]}},
        )
        patched = await _patch_spec(w, {"maxRunners": 7})
        new_generation = patched["metadata"]["generation"]

        held = await w.wait_ars(
            lambda a: (a.get("status") or {}).get("phase") == c.PHASE_PENDING,
            message="ARS Pending while the listener is replaced",
        )
        await asyncio.sleep(1.0)
        held = await w.ars()
        assert held["status"]["phase"] == c.PHASE_PENDING
        assert held["status"]["observedGeneration"] < new_generation  # not applied yet
        old = await w.listener(ars)
        assert old is not None and old["metadata"].get("deletionTimestamp")

        # Release the old listener: a new one (new UID, new maxRunners) is created.
        await w.kube.merge_patch(
            AUTOSCALING_LISTENERS,
            old,
            {
                "metadata": {
                    "finalizers": [f for f in old["metadata"]["finalizers"] if f != TEST_FINALIZER]
                }
            },
        )

        async def new_listener() -> dict[str, Any] | None:
            found = await w.listener(ars)
            if found is None or found["metadata"]["uid"] == old_uid:
                return None
            return found

        fresh = await eventually(new_listener, timeout=20, message="new listener")
        assert fresh["spec"]["maxRunners"] == 7
        pod = await w.wait_listener_pod(ars)
        ars_now = await w.wait_ars(
            lambda a: a["status"].get("observedGeneration") == new_generation,
            message="maxRunners change applied",
        )
        assert ars_now["status"]["phase"] == c.PHASE_PENDING  # new listener not running yet
        config = await w.config_json(ars)
        assert config["max_runners"] == 7

        await w.run_listener(pod)
        await w.wait_ars(
            lambda a: a["status"].get("phase") == c.PHASE_RUNNING, message="Running again"
        )
        ers_after = await w.ers()
        assert ers_after is not None
        assert ers_after["metadata"]["uid"] == ers["metadata"]["uid"]
        assert ers_after["spec"].get("actionableRevision") == ers["spec"].get("actionableRevision")


async def test_runner_group_and_name_changes_follow_in_github_and_old_listener_goes(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        tenant = w.gh.state.tenant_from_config_url(w.gh.config_url())
        group_id = w.gh.state.add_runner_group(tenant, "gpu")
        ars, listener = await _running(w)
        (ss,) = w.gh.state.scale_sets.values()
        assert ss.runner_group_id == 1

        await _patch_spec(w, {"runnerGroup": "gpu", "runnerScaleSetName": "arc-gpu"})
        ars = await w.wait_ars(
            lambda a: (
                a["metadata"]["annotations"].get(c.ANNOTATION_RUNNER_GROUP_NAME) == "gpu"
                and a["metadata"]["annotations"].get(c.ANNOTATION_RUNNER_SCALE_SET_NAME)
                == "arc-gpu"
            ),
            message="group and name annotations",
        )
        assert (ss.runner_group_id, ss.name) == (group_id, "arc-gpu")
        assert len(w.gh.state.scale_sets) == 1  # updated, not re-created

        # The listener name includes the group: the new one replaces the old one.
        new_name = w.listener_name(ars)
        assert new_name != listener["metadata"]["name"]

        async def old_gone() -> bool:
            return await w.get_or_none(AUTOSCALING_LISTENERS, listener["metadata"]["name"]) is None

        await eventually(old_gone, timeout=20, message="old listener deleted")
        assert await w.listener(ars) is not None
