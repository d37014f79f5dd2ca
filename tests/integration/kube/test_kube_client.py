"""KubeClient against the real API server: errors, locking, subresources, pagination."""

from __future__ import annotations

import pytest

from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient, PatchType
from gharc.kube.resources import CONFIG_MAPS, Resource


def cm(name: str, namespace: str, **data: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": data}


async def test_an_optimistic_lock_patch_with_a_stale_resource_version_gets_conflict(
    kube: KubeClient, namespace: str
) -> None:
    read = await kube.create(CONFIG_MAPS, cm("locked", namespace, v="1"))
    await kube.merge_patch(CONFIG_MAPS, read, {"data": {"v": "2"}}, optimistic_lock=True)
    with pytest.raises(kerrors.Conflict):
        # `read` is stale now: the second writer must not silently win.
        await kube.merge_patch(CONFIG_MAPS, read, {"data": {"v": "3"}}, optimistic_lock=True)
    assert (await kube.get(CONFIG_MAPS, "locked", namespace=namespace))["data"] == {"v": "2"}
    # Without the lock the same stale read merges (the behaviour the lock prevents).
    await kube.merge_patch(CONFIG_MAPS, read, {"data": {"v": "3"}})
    assert (await kube.get(CONFIG_MAPS, "locked", namespace=namespace))["data"] == {"v": "3"}


async def test_a_status_patch_cannot_change_spec(
    kube: KubeClient, namespace: str, widgets: Resource
) -> None:
    w = await kube.create(
        widgets, {"metadata": {"name": "w", "namespace": namespace}, "spec": {"size": 1}}
    )
    patched = await kube.patch_status(
        widgets,
        w,
        {"spec": {"size": 99}, "status": {"phase": "Ready"}},
        optimistic_lock=True,
    )
    assert patched["status"] == {"phase": "Ready"}
    assert patched["spec"] == {"size": 1}
    fresh = await kube.get(widgets, "w", namespace=namespace)
    assert fresh["spec"] == {"size": 1} and fresh["status"] == {"phase": "Ready"}
    # And the main resource ignores status.
    main = await kube.merge_patch(widgets, fresh, {"status": {"phase": "Hacked"}})
    assert main["status"] == {"phase": "Ready"}
    assert (await kube.get_status(widgets, "w", namespace=namespace))["status"]["phase"] == "Ready"


async def test_a_status_patch_with_a_stale_resource_version_gets_conflict(
    kube: KubeClient, namespace: str, widgets: Resource
) -> None:
    w = await kube.create(
        widgets, {"metadata": {"name": "w", "namespace": namespace}, "spec": {"size": 1}}
    )
    await kube.merge_patch(widgets, w, {"spec": {"size": 2}})
    with pytest.raises(kerrors.Conflict):
        await kube.patch_status(widgets, w, {"status": {"phase": "X"}}, optimistic_lock=True)


async def test_update_status_puts_only_status(
    kube: KubeClient, namespace: str, widgets: Resource
) -> None:
    w = await kube.create(
        widgets, {"metadata": {"name": "w", "namespace": namespace}, "spec": {"size": 1}}
    )
    w["status"] = {"phase": "Done"}
    w["spec"] = {"size": 5}
    updated = await kube.update_status(widgets, w)
    assert updated["status"] == {"phase": "Done"} and updated["spec"] == {"size": 1}


async def test_update_with_a_stale_resource_version_gets_conflict(
    kube: KubeClient, namespace: str
) -> None:
    read = await kube.create(CONFIG_MAPS, cm("u", namespace, v="1"))
    fresh = await kube.update(CONFIG_MAPS, {**read, "data": {"v": "2"}})
    assert fresh["data"] == {"v": "2"}
    with pytest.raises(kerrors.Conflict):
        await kube.update(CONFIG_MAPS, {**read, "data": {"v": "3"}})


async def test_errors_are_typed_from_the_status_body(kube: KubeClient, namespace: str) -> None:
    with pytest.raises(kerrors.NotFound) as nf:
        await kube.get(CONFIG_MAPS, "missing", namespace=namespace)
    assert nf.value.status == 404 and nf.value.reason == "NotFound"
    await kube.create(CONFIG_MAPS, cm("dup", namespace))
    with pytest.raises(kerrors.AlreadyExists):
        await kube.create(CONFIG_MAPS, cm("dup", namespace))
    with pytest.raises(kerrors.Invalid) as inv:
        await kube.create(CONFIG_MAPS, cm("Not_Valid", namespace))
    assert [c.field for c in inv.value.causes] == ["metadata.name"]


async def test_delete_honours_uid_and_resource_version_preconditions(
    kube: KubeClient, namespace: str
) -> None:
    first = await kube.create(CONFIG_MAPS, cm("d", namespace))
    await kube.delete(CONFIG_MAPS, first)
    await kube.create(CONFIG_MAPS, cm("d", namespace))  # same name, new uid
    with pytest.raises(kerrors.Conflict):
        await kube.delete(CONFIG_MAPS, "d", namespace=namespace, uid=first["metadata"]["uid"])
    current = await kube.get(CONFIG_MAPS, "d", namespace=namespace)
    with pytest.raises(kerrors.Conflict):
        await kube.delete(
            CONFIG_MAPS, current, resource_version=first["metadata"]["resourceVersion"]
        )
    await kube.delete(
        CONFIG_MAPS,
        current,
        uid=current["metadata"]["uid"],
        resource_version=current["metadata"]["resourceVersion"],
        propagation_policy="Background",
        grace_period_seconds=0,
    )
    assert await kube.delete(CONFIG_MAPS, "d", namespace=namespace, missing_ok=True) is None


async def test_list_follows_continue_tokens_across_pages(kube: KubeClient, namespace: str) -> None:
    for i in range(7):
        await kube.create(
            CONFIG_MAPS,
            {"metadata": {"name": f"p{i}", "namespace": namespace, "labels": {"odd": str(i % 2)}}},
        )
    before = kube.request_counts[("list", "configmaps", "200")]
    result = await kube.list_objects(CONFIG_MAPS, namespace=namespace, page_size=2)
    assert sorted(o["metadata"]["name"] for o in result.items) == [f"p{i}" for i in range(7)]
    assert kube.request_counts[("list", "configmaps", "200")] - before == 4
    assert result.resource_version
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in result.items)
    odd = await kube.list(CONFIG_MAPS, namespace=namespace, label_selector={"odd": "1"})
    assert sorted(o["metadata"]["name"] for o in odd) == ["p1", "p3", "p5"]


async def test_json_patch_with_a_resource_version_test_fails_when_stale(
    kube: KubeClient, namespace: str
) -> None:
    read = await kube.create(CONFIG_MAPS, cm("j", namespace, v="1"))
    ops = [{"op": "replace", "path": "/data/v", "value": "2"}]
    await kube.json_patch(CONFIG_MAPS, read, ops, test_resource_version=True)
    with pytest.raises(kerrors.Invalid):
        await kube.json_patch(CONFIG_MAPS, read, ops, test_resource_version=True)


async def test_server_side_apply_sets_the_fields_of_its_manager(
    kube: KubeClient, namespace: str
) -> None:
    applied = await kube.apply(
        CONFIG_MAPS, {**cm("ssa", namespace, a="1")}, field_manager="gharc-test"
    )
    assert applied["data"] == {"a": "1"}
    again = await kube.apply(CONFIG_MAPS, cm("ssa", namespace, a="2"), field_manager="gharc-test")
    assert again["data"] == {"a": "2"}
    strategic = await kube.patch(
        CONFIG_MAPS, again, {"data": {"b": "3"}}, patch_type=PatchType.STRATEGIC
    )
    assert strategic["data"] == {"a": "2", "b": "3"}


async def test_every_request_is_counted_by_verb_resource_and_code(
    kube: KubeClient, namespace: str
) -> None:
    from prometheus_client import REGISTRY

    def sample(code: str) -> float:
        value = REGISTRY.get_sample_value(
            "gharc_kube_api_requests_total",
            {"verb": "get", "resource": "configmaps", "code": code},
        )
        return value or 0.0

    before = sample("404")
    with pytest.raises(kerrors.NotFound):
        await kube.get(CONFIG_MAPS, "nope", namespace=namespace)
    assert sample("404") == before + 1
    assert kube.request_counts[("get", "configmaps", "404")] == 1
