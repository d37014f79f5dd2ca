"""Node loss (G18) decisions without a cluster: when a node counts as lost, what its pods'
status becomes, and that the reconciler waits out the timeout by requeueing."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gharc.controllers.scaleset import nodeloss
from gharc.kube import errors as kerrors
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import NODES, PODS

JSON = dict[str, Any]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def node(status: str, at: dt.datetime = T0) -> JSON:
    ts = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": "n1", "uid": "u", "labels": {"big": "x"}},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": status, "lastTransitionTime": ts},
            ],
            "images": [{"names": ["a"], "sizeBytes": 1}],
        },
    }


def running_pod(name: str, *, deleting: bool = False) -> JSON:
    meta: JSON = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "runner", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
            ],
        },
    }


def test_only_placement_and_deletion_of_a_pod_wake_its_node() -> None:
    placement = nodeloss.POD_PLACEMENT
    pending = running_pod("p")
    pending["spec"] = {}
    bound = running_pod("p")
    assert not placement.create(pending) and placement.create(bound)
    assert placement.update(pending, bound), "the binding"
    finished = running_pod("p")
    finished["status"] = {"phase": "Succeeded"}
    assert not placement.update(bound, finished), "a status write"
    assert placement.update(bound, running_pod("p", deleting=True)), "a deletion begun"
    assert not placement.delete(bound)


def test_slim_node_keeps_the_ready_condition_only() -> None:
    slim = nodeloss.slim_node(node("True"))
    assert slim["metadata"] == {"name": "n1", "uid": "u"}
    assert [c["type"] for c in slim["status"]["conditions"]] == ["Ready"]
    assert "spec" not in slim


def test_lost_since() -> None:
    assert nodeloss.lost_since(node("True")) is None
    assert nodeloss.lost_since(node("Unknown")) == T0.timestamp()
    assert nodeloss.lost_since(node("False")) == T0.timestamp()
    assert nodeloss.lost_since(None) == 0.0  # deleted: lost at once
    assert nodeloss.lost_since({"metadata": {"name": "new"}}) is None  # not reported yet


def test_lost_pod_status_is_what_the_kubelet_would_have_written() -> None:
    status = nodeloss.lost_pod_status(running_pod("p"), "n1", T0.timestamp())
    assert (status["phase"], status["reason"]) == ("Failed", "NodeLost")
    [cs] = status["containerStatuses"]
    term = cs["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "NodeLost")
    assert term["startedAt"] == "2026-01-01T00:00:00Z"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Ready": "False", "DisruptionTarget": "True"}


class FakeCache:
    def __init__(self, nodes: dict[str, JSON], pods: list[JSON]) -> None:
        self.nodes, self.pods = nodes, pods

    async def get(self, resource: Any, name: str, **_: Any) -> JSON:
        assert resource is NODES
        if name not in self.nodes:
            raise kerrors.NotFound("gone")
        return self.nodes[name]

    async def list(self, resource: Any, **_: Any) -> list[JSON]:
        assert resource is PODS
        return self.pods


class FakeKube:
    def __init__(self, nodes: dict[str, JSON] | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.nodes = nodes or {}
        """What the API server holds (the cache may not show it yet)."""

    async def get(self, resource: Any, name: str, **_: Any) -> JSON:
        assert resource is NODES
        self.calls.append(("get", name))
        if name not in self.nodes:
            raise kerrors.NotFound("gone")
        return self.nodes[name]

    async def patch_status(self, resource: Any, obj: JSON, patch: JSON) -> JSON:
        self.calls.append(("status", obj["metadata"]["name"]))
        return obj

    async def delete(self, resource: Any, obj: JSON, **kw: Any) -> None:
        assert kw["grace_period_seconds"] == 0
        self.calls.append(("force-delete", obj["metadata"]["name"]))


async def test_reconciler_requeues_until_the_timeout_then_fails_the_pods() -> None:
    now = [T0.timestamp() + 20]
    pods = [running_pod("a"), running_pod("b", deleting=True)]
    other = running_pod("c")
    other["spec"]["nodeName"] = "n2"
    kube = FakeKube()
    cache = FakeCache({"n1": node("Unknown")}, [*pods, other])
    r = nodeloss.NodeLossReconciler(kube, cache, 60.0, clock=lambda: now[0])  # type: ignore[arg-type]
    assert await r.reconcile(Request("", "n1")) == Result(requeue_after=40.0)
    assert kube.calls == []
    now[0] = T0.timestamp() + 60
    assert await r.reconcile(Request("", "n1")) is None
    assert kube.calls == [("status", "a"), ("status", "b"), ("force-delete", "b")]


async def test_ready_and_deleted_nodes() -> None:
    kube = FakeKube()
    cache = FakeCache({"n1": node("True")}, [running_pod("a")])
    r = nodeloss.NodeLossReconciler(kube, cache, 60.0, clock=lambda: T0.timestamp())  # type: ignore[arg-type]
    assert await r.reconcile(Request("", "n1")) is None and kube.calls == []
    cache.nodes.clear()  # the Node object is deleted: its pods are failed at once
    assert await r.reconcile(Request("", "n1")) is None
    assert kube.calls == [("get", "n1"), ("status", "a")]


async def test_a_node_the_cache_does_not_show_yet_is_not_lost() -> None:
    """A pod bound to a node that registered a moment ago wakes that node's reconcile
    before the node informer has delivered it: the miss is checked against the API server
    (chaos node-loss once failed a healthy pod on the replacement node this way, and its
    job never got a runner)."""
    kube = FakeKube({"n1": node("True")})
    cache = FakeCache({}, [running_pod("a")])
    r = nodeloss.NodeLossReconciler(kube, cache, 60.0, clock=lambda: T0.timestamp())  # type: ignore[arg-type]
    assert await r.reconcile(Request("", "n1")) is None
    assert kube.calls == [("get", "n1")]
