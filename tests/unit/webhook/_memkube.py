"""HRAs and RunnerDeployments in memory, for webhook tests that need no API server."""

from __future__ import annotations

import asyncio
import builtins
import copy
from typing import Any

from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS
from gharc.kube import errors as kerrors


class MemoryKube:
    """HRAs, RunnerDeployments in memory: the reader of the lookup and the client of the
    batch scaler (get, and merge_patch with the resourceVersion precondition)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[Any, str, str], dict[str, Any]] = {}
        self.patches = 0
        self.fail = 0  # make the next N patches fail
        self.gate: asyncio.Event | None = None  # patches wait for it when set
        self.at_gate = 0  # patches waiting for the gate now: what a test waits for

    def put(self, resource: Any, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        m.setdefault("resourceVersion", "1")
        self.objects[(resource, m["namespace"], m["name"])] = obj

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        try:
            return copy.deepcopy(self.objects[(resource, namespace or "", name)])
        except KeyError:
            raise kerrors.NotFound(f"{name} not found") from None

    async def list(self, resource: Any, *, namespace: str | None = None, **_: Any) -> Any:
        return [
            copy.deepcopy(o)
            for (r, ns, _n), o in self.objects.items()
            if r == resource and (namespace is None or ns == namespace)
        ]

    async def merge_patch(
        self, resource: Any, target: Any, patch: Any, *, optimistic_lock: bool = False
    ) -> Any:
        if self.gate is not None:
            self.at_gate += 1
            try:
                await self.gate.wait()
            finally:
                self.at_gate -= 1
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the API server is unavailable")
        m = target["metadata"]
        stored = self.objects[(resource, m["namespace"], m["name"])]
        if optimistic_lock and stored["metadata"]["resourceVersion"] != m["resourceVersion"]:
            raise kerrors.Conflict("changed")
        stored["spec"].update(patch["spec"])
        annotations = (patch.get("metadata") or {}).get("annotations") or {}
        if annotations:
            stored["metadata"].setdefault("annotations", {}).update(annotations)
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.patches += 1
        return copy.deepcopy(stored)

    def reservations(self, name: str = "hra") -> builtins.list[dict[str, Any]]:
        hra = self.objects[(HORIZONTAL_RUNNER_AUTOSCALERS, "ns", name)]
        return list(hra["spec"].get("capacityReservations") or [])


def world() -> MemoryKube:
    kube = MemoryKube()
    kube.put(
        RUNNER_DEPLOYMENTS,
        {
            "metadata": {"name": "rd", "namespace": "ns"},
            "spec": {"template": {"spec": {"repository": "acme/app", "labels": ["linux"]}}},
        },
    )
    kube.put(
        HORIZONTAL_RUNNER_AUTOSCALERS,
        {
            "metadata": {"name": "hra", "namespace": "ns"},
            "spec": {
                "scaleTargetRef": {"kind": "RunnerDeployment", "name": "rd"},
                "minReplicas": 0,
                "maxReplicas": 50,
                "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
            },
        },
    )
    return kube
