"""The scale set controllers cache their own pods and ServiceAccounts, pods without spec."""

from __future__ import annotations

from typing import Any

from gharc.controllers.scaleset import cacheselectors as cs
from gharc.kube.cache import Cache
from gharc.kube.labels import Selector
from gharc.kube.resources import PODS, SERVICE_ACCOUNTS


def test_runner_and_listener_pods_are_selected_and_nothing_else() -> None:
    selectors = cs.cache_selectors()
    pods = [Selector.parse(s) for s in selectors[PODS]]
    runner = {"metadata": {"labels": {"actions-ephemeral-runner": "True", "app": "x"}}}
    listener = {
        "metadata": {"labels": {"app.kubernetes.io/component": "runner-scale-set-listener"}}
    }
    other: dict[str, Any] = {"metadata": {"labels": {"app": "web"}}}
    assert [any(s.matches_object(p) for s in pods) for p in (runner, listener, other)] == [
        True,
        True,
        False,
    ]
    assert Selector.parse(selectors[SERVICE_ACCOUNTS]).matches_object(listener)


def test_cached_pods_keep_metadata_and_status_only() -> None:
    pod = {
        "metadata": {"name": "r", "uid": "u", "managedFields": [{}], "ownerReferences": [{}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "runner", "env": [{}] * 20}]},
        "status": {"phase": "Running"},
    }
    slim = cs.slim_pod(pod)
    assert slim == {
        "metadata": {"name": "r", "uid": "u", "ownerReferences": [{}]},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }


def test_the_cache_applies_per_resource_transforms() -> None:
    cache = Cache(None, transforms=cs.cache_transforms())  # type: ignore[arg-type]
    assert cache.informer(PODS).transform is cs.slim_pod
    assert cache.informer(SERVICE_ACCOUNTS).transform is not cs.slim_pod


def test_runners_of_one_set_share_one_cached_spec() -> None:
    share = cs.SharedSpecs(limit=2)
    a = share({"metadata": {"name": "a"}, "spec": {"template": {"x": [1, 2]}}})
    b = share({"metadata": {"name": "b"}, "spec": {"template": {"x": [1, 2]}}})
    c = share({"metadata": {"name": "c"}, "spec": {"template": {"x": [3]}}})
    assert a["spec"] is b["spec"] and a["spec"] == {"template": {"x": [1, 2]}}
    assert c["spec"] is not a["spec"]


def test_compact_interns_keys_and_short_values() -> None:
    import json

    from gharc.kube.informer import compact

    text = '{"metadata": {"name": "a", "managedFields": [{}], "labels": {"app": "runner"}}}'
    one, two = compact(json.loads(text)), compact(json.loads(text))
    assert "managedFields" not in one["metadata"]
    k1 = next(iter(one["metadata"]["labels"]))
    k2 = next(iter(two["metadata"]["labels"]))
    assert k1 is k2 and one["metadata"]["labels"]["app"] is two["metadata"]["labels"]["app"]
