"""Webhook server pieces without a cluster: signatures, HRA keys and lookup, batch plans,
payload checks, the delivery window, bounded REST clients. The HTTP answers are in
test_webhook_http.py."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from typing import Any

import pytest

from gharc.api.legacy.duration import parse_go_duration
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNER_SETS
from gharc.kube import errors as kerrors
from gharc.webhook import completed
from gharc.webhook.batch import (
    ADDED,
    FINISHED,
    NOTHING,
    REMOVED,
    RESERVED,
    ScaleOp,
    plan,
    plan_batch_scale,
)
from gharc.webhook.dedup import Answer, DeliveryWindow
from gharc.webhook.lookup import (
    CUSTOM,
    DEFAULT,
    ORGANIZATION,
    RunnerGroup,
    TargetLookup,
    TargetSpec,
    hra_keys,
    labels_match,
    trigger_duration,
)
from gharc.webhook.payload import PayloadError, decode, workflow_job
from gharc.webhook.signature import SignatureError, sign, verify

SECRET = "s3cret"

# ---- signatures -----------------------------------------------------------------------------


def test_a_body_signed_with_the_secret_verifies() -> None:
    body = b'{"a": 1}'
    verify(SECRET, body, {"X-Hub-Signature-256": sign(SECRET, body)})
    verify(SECRET, body, {"X-Hub-Signature-256": sign(SECRET, body).upper().replace("SHA", "sha")})


def _sha1(secret: str, body: bytes) -> str:
    return "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Hub-Signature": _sha1(SECRET, b"{}")},
        {"X-Hub-Signature-256": _sha1(SECRET, b"{}")},
        {"X-Hub-Signature-256": "sha512=" + hmac.new(b"s3cret", b"{}", "sha512").hexdigest()},
    ],
)
def test_only_a_sha256_signature_is_accepted(headers: dict[str, str]) -> None:
    """Issue 20: a correct SHA-1 signature alone used to be accepted."""
    with pytest.raises(SignatureError) as err:
        verify(SECRET, b"{}", headers)
    assert err.value.status == 403


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"X-Hub-Signature-256": sign("other", b"{}")}, 403),
        ({"X-Hub-Signature-256": "md5=abc"}, 403),
        ({"X-Hub-Signature-256": "garbage"}, 403),
    ],
)
def test_missing_or_wrong_signatures_are_rejected(headers: dict[str, str], status: int) -> None:
    with pytest.raises(SignatureError) as err:
        verify(SECRET, b"{}", headers)
    assert err.value.status == status


def test_a_tampered_body_fails_verification() -> None:
    sig = sign(SECRET, b'{"amount": 1}')
    with pytest.raises(SignatureError):
        verify(SECRET, b'{"amount": 9}', {"X-Hub-Signature-256": sig})


# ---- keys, labels, durations -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        (TargetSpec("RunnerDeployment", "", "", "o/r", "", ()), ["o/r"]),
        (TargetSpec("RunnerDeployment", "", "O", "", "", ()), ["O"]),
        (TargetSpec("RunnerDeployment", "", "O", "", "G", ()), ["O/group/G"]),
        (TargetSpec("RunnerSet", "", "O", "", "G", ()), ["O", "O/group/G"]),
        (TargetSpec("RunnerDeployment", "E", "", "", "", ()), ["enterprises/E"]),
        (TargetSpec("RunnerDeployment", "E", "", "", "G", ()), ["enterprises/E/group/G"]),
        (TargetSpec("RunnerSet", "E", "", "", "G", ()), ["enterprises/E", "enterprises/E/group/G"]),
    ],
)
def test_hra_keys_follow_arcs_table(spec: TargetSpec, keys: list[str]) -> None:
    assert hra_keys(spec) == keys


def test_webhook_label_matching_ignores_case_and_self_hosted() -> None:
    assert labels_match(["self-hosted", "Linux"], ["linux"])
    assert not labels_match(["linux", "gpu"], ["linux"])
    assert labels_match([], ["linux"])


def test_go_durations_parse_and_a_missing_duration_defaults_to_ten_minutes() -> None:
    assert parse_go_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_go_duration("90s") == dt.timedelta(seconds=90)
    with pytest.raises(ValueError):
        parse_go_duration("5 minutes")
    hra: dict[str, Any] = {"spec": {"scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}}]}}
    assert trigger_duration(hra) == dt.timedelta(minutes=10)
    hra["spec"]["scaleUpTriggers"][0]["duration"] = "30m"
    assert trigger_duration(hra) == dt.timedelta(minutes=30)
    hra["spec"]["scaleUpTriggers"].append({"githubEvent": {"workflowJob": {}}})
    assert trigger_duration(hra) is None  # exactly one trigger is required


# ---- lookup --------------------------------------------------------------------------------


class MemoryReader:
    """A Reader over dicts keyed by (resource, namespace, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[Any, str, str], dict[str, Any]] = {}

    def put(self, resource: Any, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        self.objects[(resource, m["namespace"], m["name"])] = obj

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        try:
            return self.objects[(resource, namespace or "", name)]
        except KeyError:
            raise kerrors.NotFound(f"{name} not found") from None

    async def list(self, resource: Any, *, namespace: str | None = None, **_: Any) -> Any:
        return [
            o
            for (r, ns, _n), o in self.objects.items()
            if r == resource and (namespace is None or ns == namespace)
        ]


def hra(name: str, target: str, kind: str = "RunnerDeployment", ns: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "scaleTargetRef": {"kind": kind, "name": target},
            "minReplicas": 0,
            "maxReplicas": 5,
            "scaleUpTriggers": [{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
        },
    }


def rd(name: str, ns: str = "ns", **runner: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"template": {"spec": runner}}}


def world() -> MemoryReader:
    r = MemoryReader()
    r.put(RUNNER_DEPLOYMENTS, rd("repo-rd", repository="acme/app", labels=["linux"]))
    r.put(RUNNER_DEPLOYMENTS, rd("org-rd", organization="acme", labels=["linux", "gpu"]))
    r.put(RUNNER_DEPLOYMENTS, rd("grp-rd", organization="acme", group="big", labels=["linux"]))
    r.put(HORIZONTAL_RUNNER_AUTOSCALERS, hra("repo-hra", "repo-rd"))
    r.put(HORIZONTAL_RUNNER_AUTOSCALERS, hra("org-hra", "org-rd"))
    r.put(HORIZONTAL_RUNNER_AUTOSCALERS, hra("grp-hra", "grp-rd"))
    return r


async def _find(lookup: TargetLookup, repo: str, labels: list[str], **kw: Any) -> str | None:
    owner, name = repo.split("/")
    args = {"owner_type": "Organization", "enterprise": "", **kw}
    m = await lookup.find(owner=owner, repo=name, labels=labels, **args)
    return m.name if m else None


async def test_the_repository_hra_wins_then_the_default_org_group_then_custom_groups() -> None:
    lookup = TargetLookup(world())
    assert await _find(lookup, "acme/app", ["self-hosted", "linux"]) == "repo-hra"
    assert await _find(lookup, "acme/other", ["linux"]) == "org-hra"  # Default before Custom
    assert await _find(lookup, "acme/other", ["linux", "gpu"]) == "org-hra"
    assert await _find(lookup, "acme/other", ["windows"]) is None
    assert await _find(lookup, "someone/app", ["linux"], owner_type="User") is None


async def test_group_visibility_from_github_restricts_the_groups_searched() -> None:
    async def only_big(owner: str, repo: str) -> list[RunnerGroup]:
        return [RunnerGroup(CUSTOM, ORGANIZATION, "big")]

    lookup = TargetLookup(world(), visible_groups=only_big)
    assert await _find(lookup, "acme/other", ["linux"]) == "grp-hra"

    async def default_only(owner: str, repo: str) -> list[RunnerGroup]:
        return [RunnerGroup(DEFAULT, ORGANIZATION, "")]

    lookup = TargetLookup(world(), visible_groups=default_only)
    assert await _find(lookup, "acme/other", ["linux"]) == "org-hra"


async def test_an_hra_pointing_at_a_missing_target_fails_org_lookups_as_in_arc() -> None:
    from gharc.webhook.lookup import TargetLookupError

    r = world()
    r.put(HORIZONTAL_RUNNER_AUTOSCALERS, hra("broken", "gone"))
    lookup = TargetLookup(r)
    assert await _find(lookup, "acme/app", ["linux"]) == "repo-hra"  # repo key: unaffected
    with pytest.raises(TargetLookupError):
        await _find(lookup, "acme/other", ["linux"])


async def test_runner_set_targets_are_found_by_their_labels() -> None:
    r = MemoryReader()
    r.put(
        RUNNER_SETS,
        {
            "metadata": {"name": "rs", "namespace": "ns"},
            "spec": {"organization": "acme", "labels": ["arm"]},
        },
    )
    r.put(HORIZONTAL_RUNNER_AUTOSCALERS, hra("rs-hra", "rs", kind="RunnerSet"))
    assert await _find(TargetLookup(r), "acme/x", ["ARM"]) == "rs-hra"


# ---- batch plans ------------------------------------------------------------------------------

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def _at(seconds: float) -> str:
    return (NOW + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _op(amount: int) -> ScaleOp:
    return ScaleOp("ns", "h", amount, dt.timedelta(minutes=10))


def test_a_batch_appends_one_replica_per_queued_job_and_removes_the_oldest_per_completion() -> None:
    old = [
        {"effectiveTime": _at(-100), "expirationTime": _at(500), "replicas": 1, "name": "a"},
        {"effectiveTime": _at(-50), "expirationTime": _at(550), "replicas": 1, "name": "b"},
        {"effectiveTime": _at(-200), "expirationTime": _at(-1), "replicas": 1, "name": "gone"},
    ]
    planned = plan_batch_scale(old, 10, [_op(1), _op(1), _op(-1)], NOW)
    assert [r.get("name") for r in planned] == ["b", None, None]
    assert planned[1] == {"effectiveTime": _at(0), "expirationTime": _at(600), "replicas": 1}
    assert plan_batch_scale(old, 10, [_op(-5)], NOW) == []  # never below zero


def test_reservations_beyond_max_replicas_are_restarted_so_they_do_not_expire_waiting() -> None:
    old = [
        {"effectiveTime": _at(-100), "expirationTime": _at(20), "replicas": 1},
        {"effectiveTime": _at(-100), "expirationTime": _at(20), "replicas": 1},
    ]
    planned = plan_batch_scale(old, 1, [], NOW)
    assert planned[0]["expirationTime"] == _at(20)
    assert planned[1] == {"effectiveTime": _at(0), "expirationTime": _at(120), "replicas": 1}


def _job(amount: int, job_id: int) -> ScaleOp:
    return ScaleOp("ns", "h", amount, dt.timedelta(minutes=10), f"job-{job_id}")


def test_a_named_reservation_is_added_once_and_released_by_its_own_job() -> None:
    old = [{"effectiveTime": _at(-100), "expirationTime": _at(500), "replicas": 1, "name": "job-7"}]
    planned, outcomes = plan(old, 10, [_job(1, 8), _job(1, 8), _job(1, 7)], NOW)
    assert [r["name"] for r in planned] == ["job-7", "job-8"]
    assert outcomes == [ADDED, RESERVED, RESERVED]
    planned, outcomes = plan(planned, 10, [_job(-1, 8), _job(-1, 9)], NOW)
    assert [r["name"] for r in planned] == ["job-7"]  # its own, not the oldest
    assert outcomes == [REMOVED, NOTHING]  # job 9 had none: nothing else is released


def test_a_completion_releases_an_unnamed_reservation_when_its_job_has_none() -> None:
    old = [{"effectiveTime": _at(-100), "expirationTime": _at(500), "replicas": 1}]
    planned, outcomes = plan(old, 10, [_job(-1, 3)], NOW)
    assert planned == [] and outcomes == [REMOVED]


def test_a_queued_event_after_its_completion_reserves_nothing() -> None:
    finished: set[str] = set()
    planned, outcomes = plan([], 10, [_job(-1, 5), _job(1, 5)], NOW, finished)
    assert planned == [] and outcomes == [NOTHING, FINISHED]
    assert plan([], 10, [_job(1, 5)], NOW, finished) == ([], [FINISHED])


def test_a_repeated_completion_does_not_release_another_jobs_reservation() -> None:
    """After a restart the memory is the HRA's record: the second ``completed`` of a job
    whose reservation is gone released the oldest unnamed one (ARC's), another job's."""
    old = [{"effectiveTime": _at(-100), "expirationTime": _at(500), "replicas": 1}]
    planned, outcomes = plan(old, 10, [_job(-1, 3)], NOW, {"job-3"})
    assert planned == old and outcomes == [NOTHING]


def test_the_completed_jobs_record_expires_is_bounded_and_survives_bad_values() -> None:
    now = NOW.timestamp()
    value = completed.render({}, ["job-1", "job-2"], now)
    hra: dict[str, Any] = {"metadata": {"name": "h", "annotations": {completed.ANNOTATION: value}}}
    assert list(completed.read(hra, now)) == ["job-1", "job-2"]
    assert completed.read(hra, now + completed.TTL) == {}  # forgotten after the TTL
    many = completed.render({f"job-{i}": int(now) + i + 1 for i in range(5000)}, [], now)
    assert len(json.loads(many)) == completed.CAPACITY and "job-4999" in json.loads(many)
    hra["metadata"]["annotations"][completed.ANNOTATION] = "not json"
    assert completed.read(hra, now) == {}


# ---- payloads ------------------------------------------------------------------------------


def _job_payload(**job: Any) -> dict[str, Any]:
    return {
        "action": "queued",
        "workflow_job": {"id": 1, "labels": ["linux"], **job},
        "repository": {"name": "app", "owner": {"login": "acme", "type": "Organization"}},
    }


def test_a_well_formed_payload_gives_its_fields() -> None:
    ev = workflow_job(_job_payload())
    assert (ev.job_id, ev.labels, ev.owner, ev.repo, ev.enterprise) == (
        1,
        ("linux",),
        "acme",
        "app",
        "",
    )


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        ({"labels": "linux"}, "labels"),
        ({"labels": [1, 2]}, "labels"),
        ({"id": "1"}, "id"),
        ({"id": True}, "id"),
        ({"runner_id": "r"}, "runner_id"),
        ({"conclusion": 3}, "conclusion"),
    ],
)
def test_fields_of_the_wrong_type_are_named(job: dict[str, Any], reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        workflow_job(_job_payload(**job))


def test_deep_nesting_and_non_objects_are_payload_errors() -> None:
    with pytest.raises(PayloadError, match="nested"):
        decode("application/json", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(PayloadError, match="object"):
        decode("application/json", b"[1]")
    with pytest.raises(PayloadError, match="repository"):
        workflow_job({"action": "queued", "workflow_job": {"id": 1}, "repository": []})


# ---- delivery window -----------------------------------------------------------------------


async def test_the_window_answers_a_repeat_and_forgets_failures_and_old_ids() -> None:
    now = [0.0]
    window = DeliveryWindow(capacity=2, ttl=60, clock=lambda: now[0])
    first, answer = window.claim("a")
    assert first
    again, same = window.claim("a")
    assert not again and same is answer  # in flight: wait for the first
    window.settle("a", answer, Answer(200, "ok"))
    assert (await same).text == "ok"
    first, answer = window.claim("b")
    window.settle("b", answer, Answer(503, ""))
    assert window.claim("b")[0]  # a 5xx is retried by the redelivery
    window.claim("c")
    assert len(window) == 2  # capacity: "a" was forgotten
    assert window.claim("a")[0]
    now[0] = 61.0
    assert window.claim("c")[0]  # ttl
