"""Builders and pure decisions of the EphemeralRunnerSet / EphemeralRunner reconcilers."""

from __future__ import annotations

from typing import Any

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import ANNOTATION_ACTIONABLE_REVISION
from gharc.controllers.scaleset import runnerresources as rr
from gharc.controllers.scaleset.ephemeralrunnerset import Buckets
from gharc.controllers.scaleset.labels import filter_and_merge_labels, merge_annotations
from gharc.controllers.scaleset.pod_verdicts import judge_pod, pod_ready
from gharc.kube import objects
from gharc.kube.expectations import Expectations

ERS: dict[str, Any] = {
    "apiVersion": c.API_VERSION,
    "kind": c.KIND_EPHEMERAL_RUNNER_SET,
    "metadata": {
        "name": "set",
        "namespace": "ns",
        "uid": "ers-uid",
        "labels": {c.LABEL_SCALE_SET_NAME: "set", "team": "a"},
        "annotations": {
            c.ANNOTATION_RUNNER_GROUP_NAME: "default",
            c.ANNOTATION_INTEGRITY_HASH: "x",
        },
    },
    "spec": {
        "replicas": 2,
        "patchID": 7,
        "actionableRevision": 3,
        "ephemeralRunnerMetadata": {
            "labels": {"extra": "yes", c.LABEL_COMPONENT: "mine"},
            "annotations": {"note": "n"},
        },
        "ephemeralRunnerSpec": {
            "githubConfigUrl": "https://github.com/org",
            "githubConfigSecret": "s",
            "runnerScaleSetId": 1,
            "proxy": {"http": {"url": "http://proxy:3128"}, "noProxy": ["a"]},
            "metadata": {"labels": {"tpl": "1"}},
            "spec": {
                "containers": [
                    {"name": "runner", "image": "r", "env": [{"name": "A", "value": "1"}]}
                ]
            },
        },
    },
}


def test_label_helpers_follow_arc() -> None:
    assert filter_and_merge_labels(None, None) is None
    assert merge_annotations(None, None) is None
    merged = filter_and_merge_labels(
        {"example.com/a": "1", "keep": "base", "x": "1"},
        {"keep": "over", "directly.excluded.org/label": "2", "directly.excluded.org/other": "3"},
        ("example.com/", "directly.excluded.org/label"),
    )
    assert merged == {"keep": "over", "x": "1", "directly.excluded.org/other": "3"}
    assert merge_annotations({"a": "1", "b": "1"}, {"b": "2"}) == {"a": "1", "b": "2"}


def test_new_ephemeral_runner() -> None:
    er = rr.new_ephemeral_runner(ERS)
    m = er["metadata"]
    assert m["generateName"] == "set-runner-"
    assert m["finalizers"] == [
        c.FINALIZER_EPHEMERAL_RUNNER,
        c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
    ]
    assert m["labels"][c.LABEL_COMPONENT] == c.COMPONENT_RUNNER  # computed wins
    assert m["labels"]["extra"] == "yes" and m["labels"]["team"] == "a"
    assert m["annotations"][c.ANNOTATION_PATCH_ID] == "7"
    assert m["annotations"][ANNOTATION_ACTIONABLE_REVISION] == "3"
    assert m["annotations"]["note"] == "n"
    assert c.ANNOTATION_INTEGRITY_HASH not in m["annotations"]
    assert m["ownerReferences"][0]["uid"] == "ers-uid"
    assert m["ownerReferences"][0]["controller"] is True
    assert er["spec"]["proxySecretRef"] == c.ephemeral_runner_set_proxy_secret_name("set", "ns")


def test_runner_pod_and_secret() -> None:
    er = rr.new_ephemeral_runner(ERS)
    er["metadata"].update({"name": "set-runner-abcde", "uid": "er-uid"})
    secret = rr.new_jit_secret(
        er, encoded_jit_config="jit", runner_name="set-runner-abcde", runner_id=5, scale_set_id=1
    )
    assert rr.decode_data(secret) == {
        "jitToken": "jit",
        "runnerName": "set-runner-abcde",
        "runnerId": "5",
        "scaleSetId": "1",
    }
    pod = rr.new_runner_pod(er, secret, "actions-runner-controller/test")
    env = pod["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == [
        "A",
        c.ENV_RUNNER_JIT_CONFIG,
        c.ENV_RUNNER_EXTRA_USER_AGENT,
        c.ENV_RUNNER_DEPRECATED_EXIT_CODE,
        c.ENV_HTTP_PROXY,
        c.ENV_NO_PROXY,
    ]
    assert pod["metadata"]["labels"]["tpl"] == "1"
    assert pod["metadata"]["labels"][c.LABEL_EPHEMERAL_RUNNER] == "True"
    # the template is not mutated
    assert len(er["spec"]["spec"]["containers"][0]["env"]) == 1


def test_semantic_equality_ignores_empty_fields() -> None:
    a = {"containers": [{"name": "runner", "image": "r"}]}
    b = {"containers": [{"name": "runner", "image": "r", "env": [], "resources": {}}]}
    assert objects.semantically_equal(a, b)
    assert not objects.semantically_equal(a, {"containers": [{"name": "runner", "image": "s"}]})


def _cs(**state: Any) -> dict[str, Any]:
    return {"name": "runner", "state": state}


def test_judge_pod() -> None:
    assert judge_pod({"status": {"phase": "Failed", "reason": "Evicted"}}).kind == "failed"
    assert judge_pod({"status": {"phase": "Pending", "reason": "OutOfpods"}}).kind == "failed"
    assert judge_pod({"status": {"phase": "Unknown", "reason": "NodeLost"}}).kind == "failed"
    term = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    verdict = judge_pod({"status": {"phase": "Running", "containerStatuses": [_cs(**term)]}})
    assert (verdict.kind, verdict.reason) == ("failed", "OOMKilled")
    ok = {"terminated": {"exitCode": 0}}
    assert (
        judge_pod({"status": {"phase": "Failed", "containerStatuses": [_cs(**ok)]}}).kind
        == "success"
    )
    old = {"terminated": {"exitCode": 7}}
    assert (
        judge_pod({"status": {"phase": "Failed", "containerStatuses": [_cs(**old)]}}).kind
        == "outdated"
    )
    init = {"name": "init", "state": {"terminated": {"exitCode": 1}}}
    assert (
        judge_pod({"status": {"phase": "Pending", "initContainerStatuses": [init]}}).kind
        == "failed"
    )
    assert judge_pod({"status": {"phase": "Running"}}).kind == "wait"
    assert (
        judge_pod({"status": {"phase": "Running", "containerStatuses": [_cs(running={})]}}).kind
        == "running"
    )


def test_pod_ready_takes_the_newest_condition() -> None:
    pod = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-02T00:00:00Z"},
            ]
        }
    }
    assert pod_ready(pod) is False


def _er(name: str, phase: str = "", *, deleting: bool = False, reason: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": f"2026-01-01T00:00:0{len(name)}Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": meta, "status": {"phase": phase, "reason": reason}}


def test_buckets_count_deleting_for_scale_up_and_not_failed() -> None:
    expect = Expectations()
    expect.expect_create("set", "new")
    runners = [
        _er("p"),
        _er("r", c.PHASE_RUNNING),
        _er("f", c.PHASE_FAILED, reason=c.REASON_TOO_MANY_POD_FAILURES),
        _er("i", c.PHASE_FAILED, reason=c.REASON_INVALID_POD),
        _er("s", c.PHASE_SUCCEEDED),
        _er("d", deleting=True),
    ]
    b = Buckets.of(runners, expect, "set")
    # pending + running + deleting + invalid-template failures + the one not yet cached
    assert b.scale_up_total() == 5
    assert b.scale_down_total() == 2
    assert [r["metadata"]["name"] for r in b.finished] == ["s"]
    # once the cache shows the created runner it is no longer counted twice
    b = Buckets.of([*runners, _er("new")], expect, "set")
    assert b.scale_up_total() == 5 and not expect.pending_creates("set")


def test_phase_status_always_writes_reason_and_message() -> None:
    assert rr.phase_status(c.PHASE_SUCCEEDED) == {
        "status": {"phase": c.PHASE_SUCCEEDED, "ready": False, "reason": None, "message": None}
    }
    moved = rr.phase_status(c.PHASE_PENDING, "PodLost", "gone", failures={"u": "t"}, ready=True)
    assert moved["status"] == {
        "failures": {"u": "t"},
        "phase": c.PHASE_PENDING,
        "ready": True,
        "reason": "PodLost",
        "message": "gone",
    }
