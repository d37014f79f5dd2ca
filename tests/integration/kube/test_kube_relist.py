"""A watch expired by etcd compaction recovers by relisting, losing and repeating nothing.

These tests run their own control plane with ``--watch-cache=false``: with the watch
cache on, the API server serves recent resourceVersions from memory and etcd compaction
never reaches a watcher, so the 410 path would go untested. Without it, a watch from a
compacted revision gets an ERROR event with code 410, exactly what clusters produce when
a watcher falls behind compaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gharc.kube.client import KubeClient
from gharc.kube.informer import EventHandlerFuncs, Informer
from gharc.kube.reflector import WatchSettings
from gharc.kube.resources import CONFIG_MAPS, NAMESPACES
from testworld.controlplane import ControlPlane, running_control_plane


@pytest.fixture(scope="module")
def uncached_control_plane() -> Iterator[ControlPlane]:
    with running_control_plane(extra_apiserver_args=["--watch-cache=false"]) as cp:
        yield cp


@pytest.fixture
async def kube2(uncached_control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_config(kubeconfig=uncached_control_plane.kubeconfig_path) as k:
        yield k


class Model:
    """Applies handler events to a dict; it must end up equal to the server's state."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[str, str]] = {}  # name -> (uid, resourceVersion)
        self.errors: list[str] = []

    def handler(self) -> EventHandlerFuncs:
        def add(o: dict[str, Any]) -> None:
            name = o["metadata"]["name"]
            if name in self.objects:
                self.errors.append(f"duplicate add of {name}")
            self.objects[name] = (o["metadata"]["uid"], o["metadata"]["resourceVersion"])

        def update(old: dict[str, Any], new: dict[str, Any]) -> None:
            name = new["metadata"]["name"]
            if name not in self.objects:
                self.errors.append(f"update of unknown {name}")
            if old["metadata"]["uid"] != new["metadata"]["uid"]:
                self.errors.append(f"update across uids for {name}")
            self.objects[name] = (new["metadata"]["uid"], new["metadata"]["resourceVersion"])

        def delete(o: dict[str, Any]) -> None:
            name = o["metadata"]["name"]
            if self.objects.pop(name, None) is None:
                self.errors.append(f"delete of unknown {name}")

        return EventHandlerFuncs(add=add, update=update, delete=delete)


async def _server_state(kube: KubeClient, namespace: str) -> dict[str, tuple[str, str]]:
    items = await kube.list(CONFIG_MAPS, namespace=namespace)
    return {
        o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
        for o in items
    }


async def _churn(kube: KubeClient, namespace: str, prefix: str) -> None:
    """Creates, updates, deletes and a delete+recreate under one name."""
    for i in range(5):
        await kube.create(
            CONFIG_MAPS, {"metadata": {"name": f"{prefix}{i}", "namespace": namespace}}
        )
    await kube.merge_patch(CONFIG_MAPS, f"{prefix}0", {"data": {"v": "x"}}, namespace=namespace)
    await kube.delete(CONFIG_MAPS, f"{prefix}1", namespace=namespace)
    await kube.delete(CONFIG_MAPS, f"{prefix}2", namespace=namespace)
    await kube.create(CONFIG_MAPS, {"metadata": {"name": f"{prefix}2", "namespace": namespace}})


async def test_a_resumed_watch_from_a_compacted_revision_relists_to_the_exact_state(
    kube2: KubeClient, uncached_control_plane: ControlPlane, eventually: Any
) -> None:
    ns = "relist-resume"
    await kube2.create(NAMESPACES, {"metadata": {"name": ns}})
    await _churn(kube2, ns, "before")
    informer = Informer(kube2, CONFIG_MAPS, namespace=ns)
    model = Model()
    informer.add_event_handler(model.handler())
    informer.start()
    assert await informer.wait_for_sync(10)
    await informer.stop()  # the informer is away: its resourceVersion goes stale

    await _churn(kube2, ns, "during")
    await kube2.delete(CONFIG_MAPS, "before3", namespace=ns)
    await kube2.merge_patch(CONFIG_MAPS, "before4", {"data": {"v": "y"}}, namespace=ns)
    uncached_control_plane.compact_etcd()

    informer.start()  # resumes the watch from the compacted revision -> ERROR 410 -> relist
    try:
        expected = await _server_state(kube2, ns)
        await eventually(lambda: informer.reflector.lists == 2, timeout=20)
        await eventually(lambda: model.objects == expected, timeout=10)
        assert model.errors == []
        store = {
            o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for o in informer.store.list()
        }
        assert store == expected
        # And it keeps watching afterwards.
        await kube2.create(CONFIG_MAPS, {"metadata": {"name": "after", "namespace": ns}})
        await eventually(lambda: "after" in model.objects)
        assert model.errors == []
    finally:
        await informer.stop()


async def test_a_running_informer_survives_compaction_at_its_next_reconnect(
    kube2: KubeClient, uncached_control_plane: ControlPlane, eventually: Any
) -> None:
    ns = "relist-running"
    await kube2.create(NAMESPACES, {"metadata": {"name": ns}})
    # The server ends each watch after 1-2 s, so reconnects happen during the test.
    informer = Informer(
        kube2, CONFIG_MAPS, namespace=ns, settings=WatchSettings(min_watch_timeout=1)
    )
    model = Model()
    informer.add_event_handler(model.handler())
    informer.start()
    try:
        assert await informer.wait_for_sync(10)
        await _churn(kube2, ns, "a")
        expected = await _server_state(kube2, ns)
        await eventually(lambda: model.objects == expected, timeout=10)
        # Writes elsewhere move etcd's revision past ours without an event for us (no
        # bookmarks without the watch cache); compaction then expires our revision, and
        # the next reconnect gets 410.
        await kube2.create(
            CONFIG_MAPS, {"metadata": {"name": f"{ns}-elsewhere", "namespace": "default"}}
        )
        uncached_control_plane.compact_etcd()
        await eventually(lambda: informer.reflector.lists >= 2, timeout=20)
        await _churn(kube2, ns, "b")
        expected = await _server_state(kube2, ns)
        await eventually(lambda: model.objects == expected, timeout=10)
        assert model.errors == []
    finally:
        await informer.stop()
