"""Informers and the cache against the real API server."""

from __future__ import annotations

from typing import Any

import pytest

from gharc.kube import errors as kerrors
from gharc.kube.cache import Cache, CacheNotStarted
from gharc.kube.client import KubeClient
from gharc.kube.informer import EventHandlerFuncs, Informer
from gharc.kube.resources import CONFIG_MAPS, NAMESPACES
from gharc.kube.store import BY_OWNER_UID, index_by_label, index_by_owner_uid


class Journal:
    """Records handler calls as (kind, name, value of data.v)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []

    @staticmethod
    def _v(obj: dict[str, Any]) -> str | None:
        return (obj.get("data") or {}).get("v")

    def handler(self) -> EventHandlerFuncs:
        return EventHandlerFuncs(
            add=lambda o: self.events.append(("add", o["metadata"]["name"], self._v(o))),
            update=lambda old, new: self.events.append(
                ("update", new["metadata"]["name"], self._v(new))
            ),
            delete=lambda o: self.events.append(("delete", o["metadata"]["name"], self._v(o))),
        )


async def test_an_informer_sees_create_update_and_delete_in_order(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    informer = Informer(kube, CONFIG_MAPS, namespace=namespace)
    journal = Journal()
    informer.add_event_handler(journal.handler())
    informer.start()
    try:
        assert await informer.wait_for_sync(10)
        assert journal.events == []
        made = await kube.create(
            CONFIG_MAPS, {"metadata": {"name": "x", "namespace": namespace}, "data": {"v": "1"}}
        )
        await kube.merge_patch(CONFIG_MAPS, made, {"data": {"v": "2"}})
        await kube.merge_patch(CONFIG_MAPS, made, {"data": {"v": "3"}})
        await kube.delete(CONFIG_MAPS, made)
        await eventually(lambda: len(journal.events) == 4)
        assert journal.events == [
            ("add", "x", "1"),
            ("update", "x", "2"),
            ("update", "x", "3"),
            ("delete", "x", "3"),
        ]
        assert len(informer.store) == 0
    finally:
        await informer.stop()


async def test_a_handler_added_after_sync_gets_the_cached_objects_as_adds(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    for name in ("a", "b"):
        await kube.create(CONFIG_MAPS, {"metadata": {"name": name, "namespace": namespace}})
    informer = Informer(kube, CONFIG_MAPS, namespace=namespace)
    informer.start()
    try:
        assert await informer.wait_for_sync(10)
        journal = Journal()
        informer.add_event_handler(journal.handler())
        assert sorted(e[1] for e in journal.events) == ["a", "b"]
    finally:
        await informer.stop()


async def test_a_label_selected_informer_caches_only_matching_objects(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    cache = Cache(kube, namespace=namespace, label_selectors={CONFIG_MAPS: "app=gharc"})
    await cache.start()
    try:
        await kube.create(
            CONFIG_MAPS,
            {"metadata": {"name": "ours", "namespace": namespace, "labels": {"app": "gharc"}}},
        )
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "theirs", "namespace": namespace}})
        informer = cache.informer(CONFIG_MAPS)
        assert await cache.wait_for_sync(10)
        await eventually(lambda: len(informer.store) == 1)
        assert (await cache.get(CONFIG_MAPS, "ours", namespace=namespace))["metadata"][
            "name"
        ] == "ours"
        with pytest.raises(kerrors.NotFound):
            await cache.get(CONFIG_MAPS, "theirs", namespace=namespace)
    finally:
        await cache.stop()


async def test_an_informer_with_two_selectors_caches_objects_matching_either(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    """Runner pods and listener pods share no label: one store, one list+watch each."""
    cache = Cache(kube, namespace=namespace, label_selectors={CONFIG_MAPS: ("a=1", "b=2")})
    informer = cache.informer(CONFIG_MAPS)
    journal = Journal()
    informer.add_event_handler(journal.handler())
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        for name, labels in (("one", {"a": "1"}), ("two", {"b": "2"}), ("none", {"c": "3"})):
            await kube.create(
                CONFIG_MAPS, {"metadata": {"name": name, "namespace": namespace, "labels": labels}}
            )
        await eventually(lambda: len(informer.store) == 2)
        assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["one", "two"]
        await kube.delete(CONFIG_MAPS, "two", namespace=namespace)
        await eventually(lambda: len(informer.store) == 1)
        events = [e[:2] for e in journal.events]
        # One watch per selector: the two adds may arrive in either order.
        assert sorted(events[:2]) == [("add", "one"), ("add", "two")]
        assert events[2:] == [("delete", "two")]
    finally:
        await cache.stop()


async def test_the_cache_shares_one_informer_per_resource_and_serves_indexes(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    cache = Cache(kube, namespace=namespace)
    assert cache.informer(CONFIG_MAPS) is cache.informer(CONFIG_MAPS)
    cache.add_indexer(CONFIG_MAPS, BY_OWNER_UID, index_by_owner_uid)
    cache.add_indexer(CONFIG_MAPS, "role", index_by_label("role"))
    with pytest.raises(CacheNotStarted):
        await cache.list(CONFIG_MAPS)
    parent = await kube.create(
        CONFIG_MAPS, {"metadata": {"name": "parent", "namespace": namespace}}
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "parent",
        "uid": parent["metadata"]["uid"],
        "controller": True,
    }
    for i in range(3):
        await kube.create(
            CONFIG_MAPS,
            {
                "metadata": {
                    "name": f"child{i}",
                    "namespace": namespace,
                    "ownerReferences": [ref],
                    "labels": {"role": "even" if i % 2 == 0 else "odd"},
                }
            },
        )
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        children = await cache.list(CONFIG_MAPS, index=(BY_OWNER_UID, parent["metadata"]["uid"]))
        assert sorted(c["metadata"]["name"] for c in children) == ["child0", "child1", "child2"]
        even = await cache.list(CONFIG_MAPS, index=("role", "even"))
        assert sorted(c["metadata"]["name"] for c in even) == ["child0", "child2"]
        odd = await cache.list(CONFIG_MAPS, namespace=namespace, label_selector="role in (odd)")
        assert [c["metadata"]["name"] for c in odd] == ["child1"]
        # managedFields are stripped from cached objects (memory); copies are private.
        got = await cache.get(CONFIG_MAPS, "child0", namespace=namespace, copy=True)
        assert "managedFields" not in got["metadata"]
        got["metadata"]["name"] = "mutated"
        assert (await cache.get(CONFIG_MAPS, "child0", namespace=namespace))["metadata"][
            "name"
        ] == "child0"
    finally:
        await cache.stop()


async def test_a_cache_over_two_namespaces_sees_both_and_nothing_else(
    kube: KubeClient, namespace: str, eventually: Any
) -> None:
    other, outside = f"{namespace}-b", f"{namespace}-c"
    for ns in (other, outside):
        await kube.create(NAMESPACES, {"metadata": {"name": ns}})
    for ns in (namespace, other, outside):
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "cm", "namespace": ns}})
    cache = Cache(kube, namespaces=[namespace, other])
    informer = cache.informer(CONFIG_MAPS)
    journal = Journal()
    informer.add_event_handler(journal.handler())
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        seen = {o["metadata"]["namespace"] for o in await cache.list(CONFIG_MAPS)}
        assert seen == {namespace, other}
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "late", "namespace": other}})
        await kube.create(CONFIG_MAPS, {"metadata": {"name": "late", "namespace": outside}})
        await eventually(lambda: ("add", "late", None) in journal.events)
        assert [e for e in journal.events if e[1] == "late"] == [("add", "late", None)]
        # a relist of one namespace must not drop the other namespace's objects
        informer.replace_scope([], other)
        assert {o["metadata"]["namespace"] for o in informer.store} == {namespace}
    finally:
        await cache.stop()
