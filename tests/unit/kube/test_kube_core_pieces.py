"""Small pieces of gharc.kube that need no cluster: errors, paths, selectors, stores, handlers."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import gharc.kube
from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.kube import errors as kerrors
from gharc.kube.handler import EnqueueRequestForOwner, owner_reference
from gharc.kube.informer import EventHandlerFuncs, Informer
from gharc.kube.labels import Selector
from gharc.kube.logging import JsonFormatter, log_context
from gharc.kube.predicate import (
    ChangedBesides,
    GenerationChangedPredicate,
    LabelSelectorPredicate,
    not_,
)
from gharc.kube.reconcile import Request
from gharc.kube.resources import CONFIG_MAPS, NAMESPACES, PODS
from gharc.kube.store import BY_OWNER_UID, Store, copy_object, index_by_owner_uid


def obj(name: str, ns: str = "ns", rv: str = "1", uid: str = "", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": rv,
            "uid": uid or name,
            **meta,
        }
    }


def test_the_public_surface_is_sorted_and_importable() -> None:
    names = gharc.kube.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    for name in names:
        assert getattr(gharc.kube, name) is not None


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", kerrors.NotFound),
        (409, "Conflict", kerrors.Conflict),
        (409, "AlreadyExists", kerrors.AlreadyExists),
        (410, "Expired", kerrors.Gone),
        (410, "Gone", kerrors.Gone),
        (422, "Invalid", kerrors.Invalid),
        (403, "Forbidden", kerrors.Forbidden),
        (429, "TooManyRequests", kerrors.TooManyRequests),
        (504, "Timeout", kerrors.ServerTimeout),
        (500, "ServerTimeout", kerrors.ServerTimeout),
        (418, "Teapot", kerrors.ApiError),
    ],
)
def test_errors_are_chosen_by_code_and_reason(code: int, reason: str, cls: type) -> None:
    err = kerrors.error_from_status(
        {"kind": "Status", "code": code, "reason": reason, "message": "m"}
    )
    assert type(err) is cls
    assert err.status == code and err.reason == reason and err.message == "m"


def test_already_exists_is_not_a_conflict() -> None:
    assert not issubclass(kerrors.AlreadyExists, kerrors.Conflict)


def test_retry_after_comes_from_the_header_or_the_details() -> None:
    body = json.dumps({"kind": "Status", "code": 429, "reason": "TooManyRequests"}).encode()
    assert kerrors.error_from_response(429, body, {"Retry-After": "3"}).retry_after == 3.0
    status = {
        "kind": "Status",
        "code": 429,
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 7},
    }
    assert kerrors.error_from_status(status).retry_after == 7.0


def test_a_non_json_error_body_still_gives_a_typed_error() -> None:
    err = kerrors.error_from_response(503, b"<html>unavailable</html>")
    assert isinstance(err, kerrors.ServiceUnavailable) and "unavailable" in err.message


def test_resource_paths_cover_core_groups_namespaces_and_subresources() -> None:
    assert PODS.path(namespace="a") == "/api/v1/namespaces/a/pods"
    assert PODS.path() == "/api/v1/pods"
    assert (
        PODS.path(namespace="a", name="p", subresource="status")
        == "/api/v1/namespaces/a/pods/p/status"
    )
    assert NAMESPACES.path(name="x") == "/api/v1/namespaces/x"
    assert (
        EPHEMERAL_RUNNERS.path(namespace="n", name="r")
        == "/apis/actions.github.com/v1alpha1/namespaces/n/ephemeralrunners/r"
    )
    assert EPHEMERAL_RUNNERS.api_version == "actions.github.com/v1alpha1"
    with pytest.raises(ValueError):
        NAMESPACES.path(namespace="a")


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a in (x, y),b", {"a": "y", "b": ""}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("!a", {"a": "1"}, False),
        ("a", {}, False),
        ("", {"any": "thing"}, True),
    ],
)
def test_label_selectors_match_like_the_api_server(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert Selector.parse(selector).matches(labels) is expected


def test_a_label_selector_spec_with_match_expressions_is_understood() -> None:
    sel = Selector.from_label_selector(
        {
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
        }
    )
    assert sel.matches({"app": "x", "tier": "a"}) and not sel.matches({"app": "x"})


def test_store_indexes_follow_updates_and_removals() -> None:
    store = Store(indexers={BY_OWNER_UID: index_by_owner_uid})
    store.upsert(obj("c1", ownerReferences=[{"uid": "p1"}]))
    store.upsert(obj("c2", ownerReferences=[{"uid": "p1"}]))
    assert {o["metadata"]["name"] for o in store.by_index(BY_OWNER_UID, "p1")} == {"c1", "c2"}
    store.upsert(obj("c2", rv="2", ownerReferences=[{"uid": "p2"}]))
    assert [o["metadata"]["name"] for o in store.by_index(BY_OWNER_UID, "p1")] == ["c1"]
    store.remove(("ns", "c1"))
    assert store.by_index(BY_OWNER_UID, "p1") == []
    assert store.index_values(BY_OWNER_UID) == ["p2"]
    assert [o["metadata"]["name"] for o in store.list("ns")] == ["c2"]


def test_copy_object_is_deep() -> None:
    original = {"a": [{"b": 1}]}
    copied = copy_object(original)
    copied["a"][0]["b"] = 2
    assert original == {"a": [{"b": 1}]}


def test_a_relist_emits_only_the_differences_and_splits_a_recreated_object() -> None:
    """The informer as a reflector sink (no server involved: it is pure bookkeeping)."""
    informer = Informer(None, CONFIG_MAPS)  # type: ignore[arg-type]
    events: list[tuple[str, str]] = []
    informer.add_event_handler(
        EventHandlerFuncs(
            add=lambda o: events.append(("add", o["metadata"]["name"])),
            update=lambda a, b: events.append(("update", b["metadata"]["name"])),
            delete=lambda o: events.append(("delete", o["metadata"]["name"])),
        )
    )
    informer.replace([obj("same"), obj("changed"), obj("gone"), obj("recreated", uid="u1")], "10")
    events.clear()
    informer.replace(
        [obj("same"), obj("changed", rv="5"), obj("recreated", rv="6", uid="u2"), obj("new")], "20"
    )
    assert sorted(events) == [
        ("add", "new"),
        ("add", "recreated"),
        ("delete", "gone"),
        ("delete", "recreated"),
        ("update", "changed"),
    ]
    assert informer.has_synced


def test_the_owner_handler_maps_only_the_controller_reference_of_the_owner_kind() -> None:
    owner = {
        "apiVersion": EPHEMERAL_RUNNER_SETS.api_version,
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "set", "uid": "u"},
    }
    other = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "uid": "v"}}
    child = obj("runner", ownerReferences=[owner_reference(owner), owner_reference(other)])
    handler = EnqueueRequestForOwner(EPHEMERAL_RUNNER_SETS)
    assert list(handler.requests(child)) == [Request("ns", "set")]
    loose = obj("runner", ownerReferences=[owner_reference(owner, controller=False)])
    assert list(handler.requests(loose)) == []
    assert list(
        EnqueueRequestForOwner(EPHEMERAL_RUNNER_SETS, only_controller=False).requests(loose)
    ) == [Request("ns", "set")]


def test_predicates_filter_status_only_updates_and_unmatched_labels() -> None:
    gen = GenerationChangedPredicate()
    assert not gen.update(obj("a", generation=1), obj("a", rv="2", generation=1))
    assert gen.update(obj("a", generation=1), obj("a", rv="2", generation=2))
    assert gen.update(obj("a"), obj("a", rv="2")), "no generation: let it through"
    sel = LabelSelectorPredicate({"app": "gharc"})
    assert sel.create(obj("a", labels={"app": "gharc"}))
    assert not sel.create(obj("a"))
    assert not_(sel).create(obj("a"))


def test_changed_besides_skips_updates_of_the_named_fields_only() -> None:
    def runner_set(rv: str, generation: int, replicas: int, patch_id: int, **status: Any) -> Any:
        o = obj("set", rv=rv, generation=generation, managedFields=[{"manager": rv}])
        o["spec"] = {"replicas": replicas, "patchID": patch_id, "template": {"image": "a"}}
        o["status"] = {"currentReplicas": 1, **status}
        return o

    scale_writes = ChangedBesides("spec.replicas", "spec.patchID")
    before = runner_set("1", 1, 1, 4)
    assert not scale_writes.update(before, runner_set("2", 2, 3, 5)), "a listener's patch"
    assert scale_writes.update(before, runner_set("2", 1, 1, 4, pendingEphemeralRunners=2))
    edited = runner_set("2", 2, 1, 4)
    edited["spec"]["template"] = {"image": "b"}
    assert scale_writes.update(before, edited)
    labelled = runner_set("2", 1, 1, 4)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert scale_writes.update(before, labelled)
    assert not scale_writes.update(before, runner_set("1", 1, 1, 4)), "a resync"
    assert before == runner_set("1", 1, 1, 4), "the cached objects are left as they were"
    assert scale_writes.create(before) and scale_writes.delete(before)
    assert ChangedBesides("status.lastMessageTime").update(
        {"metadata": {"resourceVersion": "1"}, "status": "odd"},
        {"metadata": {"resourceVersion": "2"}, "status": "odder"},
    ), "a field that is not a mapping where the path expects one is compared whole"


def test_json_logs_carry_the_reconcile_context() -> None:
    record = logging.LogRecord("gharc.test", logging.INFO, __file__, 1, "hello %s", ("x",), None)
    with log_context(controller="c", namespace="ns", name="n"):
        line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "hello x" and line["controller"] == "c" and line["name"] == "n"
    assert line["ts"].endswith("Z")
    assert "controller" not in json.loads(JsonFormatter().format(record))


def test_configmaps_are_core_v1() -> None:
    assert CONFIG_MAPS.api_version == "v1" and str(CONFIG_MAPS) == "configmaps"
    assert str(EPHEMERAL_RUNNERS) == "ephemeralrunners.actions.github.com"
