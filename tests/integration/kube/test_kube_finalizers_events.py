"""Finalizer helpers and the event recorder against the real API server."""

from __future__ import annotations

import pytest

from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.events import NORMAL, WARNING, EventRecorder
from gharc.kube.finalizers import add_finalizer, remove_finalizer
from gharc.kube.resources import CONFIG_MAPS, EVENTS

F = "actions.github.com/test-finalizer"


async def test_finalizers_are_added_and_removed_with_optimistic_locking(
    kube: KubeClient, namespace: str
) -> None:
    obj = await kube.create(
        CONFIG_MAPS,
        {"metadata": {"name": "f", "namespace": namespace, "finalizers": ["other.io/keep"]}},
    )
    added = await add_finalizer(kube, CONFIG_MAPS, obj, F)
    assert added["metadata"]["finalizers"] == ["other.io/keep", F]
    assert await add_finalizer(kube, CONFIG_MAPS, added, F) is added, "no request when present"
    with pytest.raises(kerrors.Conflict):
        # `obj` is stale: writing its list would drop what was added since.
        await add_finalizer(kube, CONFIG_MAPS, obj, "third.io/x")
    await kube.delete(CONFIG_MAPS, added)
    deleting = await kube.get(CONFIG_MAPS, "f", namespace=namespace)
    assert deleting["metadata"].get("deletionTimestamp")
    kept = await remove_finalizer(kube, CONFIG_MAPS, deleting, F)
    assert not objects.has_finalizer(kept, F) and objects.has_finalizer(kept, "other.io/keep")
    await remove_finalizer(kube, CONFIG_MAPS, kept, "other.io/keep")
    with pytest.raises(kerrors.NotFound):
        await kube.get(CONFIG_MAPS, "f", namespace=namespace)


async def test_repeated_events_are_aggregated_into_one_with_a_count(
    kube: KubeClient, namespace: str
) -> None:
    obj = await kube.create(CONFIG_MAPS, {"metadata": {"name": "subject", "namespace": namespace}})
    recorder = EventRecorder(kube, component="gharc-test")
    for _ in range(3):
        recorder.record(obj, WARNING, "BackOff", "listener failed; retrying")
    recorder.record(obj, NORMAL, "Created", "created pod x")
    await recorder.flush()
    await recorder.close()
    events = await kube.list(EVENTS, namespace=namespace)
    by_reason = {e["reason"]: e for e in events}
    assert sorted(by_reason) == ["BackOff", "Created"]
    backoff = by_reason["BackOff"]
    assert backoff["count"] == 3 and backoff["type"] == "Warning"
    assert backoff["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert backoff["involvedObject"]["kind"] == "ConfigMap"
    assert backoff["source"]["component"] == "gharc-test"
