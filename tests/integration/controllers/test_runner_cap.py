"""--max-runners-per-scale-set: one tenant's scale set cannot ask the shared controller for
more runners than the operator allows, and the set says so (condition and event)."""

from __future__ import annotations

from typing import Any

from _arsworld import World, running_world

from gharc.api.resources import AUTOSCALING_RUNNER_SETS
from gharc.controllers.scaleset import conditions as cond
from testworld.wait import eventually


def _capped(ars: dict[str, Any]) -> dict[str, Any] | None:
    found = cond.find((ars.get("status") or {}).get("conditions"), cond.RUNNERS_CAPPED)
    return dict(found) if found is not None else None


async def _listener_counts(w: World, ars: dict[str, Any]) -> tuple[int, int] | None:
    listener = await w.listener(ars)
    if listener is None:
        return None
    return listener["spec"]["minRunners"], listener["spec"]["maxRunners"]


async def test_a_set_asking_beyond_the_cap_is_capped_and_says_so(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace, max_runners_per_scale_set=5) as w:
        ars = await w.create_ars("arc", minRunners=400, maxRunners=500)

        async def counts() -> bool:
            return await _listener_counts(w, ars) == (5, 5)

        await eventually(counts, timeout=20, message="listener asks for at most 5 runners")
        capped = await w.wait_ars(
            lambda a: (_capped(a) or {}).get("status") == cond.TRUE, message="RunnersCapped"
        )
        condition = _capped(capped)
        assert condition is not None and condition["reason"] == cond.REASON_CAPPED
        assert "maxRunners 500 and minRunners 400" in condition["message"]
        assert "--max-runners-per-scale-set" in condition["message"]
        event = await w.wait_event(cond.REASON_CAPPED)
        assert "at most 5 runners" in event["message"]

        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS,
            "arc",
            {"spec": {"minRunners": 0, "maxRunners": 3}},
            namespace=namespace,
        )
        within = await w.wait_ars(
            lambda a: (_capped(a) or {}).get("status") == cond.FALSE, message="within limit"
        )
        assert (_capped(within) or {})["reason"] == cond.REASON_WITHIN_LIMIT

        async def uncapped() -> bool:
            return await _listener_counts(w, ars) == (0, 3)

        await eventually(uncapped, timeout=20, message="listener follows maxRunners 3")


async def test_without_a_cap_the_set_gets_what_it_asks(kubeconfig: str, namespace: str) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars = await w.create_ars("arc", minRunners=40, maxRunners=500)

        async def counts() -> bool:
            return await _listener_counts(w, ars) == (40, 500)

        await eventually(counts, timeout=20, message="listener asks for what the set asks")
        assert _capped(await w.ars()) is None
