"""The fetch-the-object opening every reconciler shares: read, stop when gone, hand over."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.kube import errors as kerrors
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import NODES, PODS, Resource

JSON = dict[str, Any]


class Store:
    """Objects by (kind, namespace, name), read the way the cache reads them."""

    def __init__(self, *objects: JSON, error: Exception | None = None) -> None:
        self.objects = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for o in objects
        }
        self.error = error
        self.reads: list[tuple[str, str | None, str]] = []

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        self.reads.append((resource.kind, namespace, name))
        if self.error is not None:
            raise self.error
        try:
            return self.objects[(resource.kind, namespace or "", name)]
        except KeyError:
            raise kerrors.NotFound(f"{resource.kind} {name} not found") from None


def pod(name: str = "p", namespace: str = "ns") -> JSON:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {}}


class Seen:
    def __init__(self, result: Result | None = None) -> None:
        self.objects: list[JSON] = []
        self.result = result

    async def __call__(self, obj: JSON) -> Result | None:
        self.objects.append(obj)
        return self.result


async def test_the_object_named_by_the_request_is_handed_over_with_its_result() -> None:
    store, seen = Store(pod("a"), pod("b")), Seen(Result(requeue_after=3))
    result = await reconcile_fetched(store.get, PODS, Request("ns", "b"), seen)
    assert result == Result(requeue_after=3)
    assert seen.objects == [store.objects[("Pod", "ns", "b")]]
    assert store.reads == [("Pod", "ns", "b")]


async def test_an_object_that_is_gone_ends_the_reconcile_after_on_gone() -> None:
    store, seen, gone = Store(pod("a")), Seen(Result(requeue=True)), []
    result = await reconcile_fetched(store.get, PODS, Request("ns", "b"), seen, on_gone=gone.append)
    assert result is None
    assert seen.objects == []
    assert gone == [Request("ns", "b")]


async def test_only_not_found_is_handled() -> None:
    """A failed read is the controller's to retry with backoff, not a vanished object."""
    store, gone = Store(pod(), error=kerrors.Conflict("busy")), []
    with pytest.raises(kerrors.Conflict):
        await reconcile_fetched(store.get, PODS, Request("ns", "p"), Seen(), on_gone=gone.append)
    assert gone == []


async def test_copy_hands_over_a_private_copy() -> None:
    store = Store(pod())
    shared, private = Seen(), Seen()
    await reconcile_fetched(store.get, PODS, Request("ns", "p"), shared)
    await reconcile_fetched(store.get, PODS, Request("ns", "p"), private, copy=True)
    assert shared.objects[0] is store.objects[("Pod", "ns", "p")]
    private.objects[0]["spec"]["nodeName"] = "n1"
    assert private.objects[0] is not store.objects[("Pod", "ns", "p")]
    assert store.objects[("Pod", "ns", "p")]["spec"] == {}


def test_request_of_names_the_object_as_the_controller_queues_it() -> None:
    assert request_of(pod("p", "ns")) == Request("ns", "p")
    node = {"kind": NODES.kind, "metadata": {"name": "n1"}}
    assert request_of(node) == Request("", "n1")
