"""Webhook server pieces without a cluster: signatures, HRA keys and lookup, batch plans,
and the HTTP answers."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gharc.kube.errors import NotFound
from gharc.kube.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNER_SETS
from gharc.webhook.batch import BatchScaler, ScaleOp, plan_batch_scale
from gharc.webhook.lookup import (
    CUSTOM,
    DEFAULT,
    ORGANIZATION,
    RunnerGroup,
    TargetLookup,
    TargetSpec,
    hra_keys,
    labels_match,
    parse_go_duration,
    trigger_duration,
)
from gharc.webhook.server import NO_TARGET, WebhookHandler, make_app
from gharc.webhook.signature import SignatureError, sign, verify

SECRET = "s3cret"

# ---- signatures -----------------------------------------------------------------------------


def test_a_body_signed_with_the_secret_verifies() -> None:
    body = b'{"a": 1}'
    verify(SECRET, body, {"X-Hub-Signature-256": sign(SECRET, body)})
    verify(SECRET, body, {"X-Hub-Signature": sign(SECRET, body, "sha1")})


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
            raise NotFound(f"{name} not found") from None

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


# ---- HTTP answers ------------------------------------------------------------------------------


def _payload(action: str, labels: list[str], **job: Any) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_job": {"id": 1, "run_id": 2, "labels": labels, **job},
        "repository": {
            "name": "app",
            "full_name": "acme/app",
            "owner": {"login": "acme", "type": "Organization"},
        },
    }


class _Client:
    def __init__(self, client: TestClient, scaler: BatchScaler) -> None:
        self.client, self.scaler = client, scaler

    async def post(
        self, payload: Any, event: str = "workflow_job", secret: str | None = SECRET, **kw: Any
    ) -> tuple[int, str]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "Content-Type": "application/json",
            "X-GitHub-Delivery": "d-1",
        }
        if secret is not None:
            headers["X-Hub-Signature-256"] = sign(secret, body)
        headers.update(kw.pop("headers", {}))
        resp = await self.client.post("/", data=body, headers=headers)
        return resp.status, await resp.text()


@pytest.fixture
async def http() -> Any:
    scaler = BatchScaler(None, queue_limit=2)  # type: ignore[arg-type]
    handler = WebhookHandler(TargetLookup(world()), scaler, secret=SECRET)
    client = TestClient(TestServer(make_app(handler)))
    await client.start_server()
    yield _Client(client, scaler)
    await client.close()


async def test_queued_and_completed_jobs_enqueue_plus_and_minus_one(http: _Client) -> None:
    assert await http.post(_payload("queued", ["linux"])) == (200, "scaled repo-hra by 1")
    status, text = await http.post(_payload("completed", ["linux"], conclusion="failure"))
    assert (status, text) == (200, "scaled repo-hra by -1")
    ops = [http.scaler.queue.get_nowait().amount for _ in range(2)]
    assert ops == [1, -1]


async def test_ignored_events_answer_200_and_enqueue_nothing(http: _Client) -> None:
    assert await http.post(_payload("in_progress", ["linux"])) == (200, "")
    assert await http.post(_payload("completed", ["linux"], conclusion="skipped")) == (200, "")
    assert await http.post(_payload("completed", ["linux"], conclusion="success")) == (200, "")
    assert await http.post(_payload("queued", ["windows"])) == (200, NO_TARGET)
    assert http.scaler.queue.empty()


async def test_bad_signatures_and_bodies_are_rejected_and_never_applied(http: _Client) -> None:
    assert (await http.post(_payload("queued", ["linux"]), secret=None))[0] == 401
    assert (await http.post(_payload("queued", ["linux"]), secret="wrong"))[0] == 403
    assert (await http.post(b"{not json"))[0] == 400
    assert (await http.post(_payload("queued", ["linux"]), event=""))[0] == 400
    assert http.scaler.queue.empty()


async def test_ping_get_unknown_events_and_a_full_queue(http: _Client) -> None:
    assert await http.post({"zen": "hi"}, event="ping") == (200, "pong")
    assert (await http.post({"action": "created"}, event="check_run"))[0] == 500
    resp = await http.client.get("/anything")
    assert resp.status == 200 and "running" in await resp.text()
    for _ in range(2):
        assert (await http.post(_payload("queued", ["linux"])))[0] == 200
    assert (await http.post(_payload("queued", ["linux"])))[0] == 500  # queue_limit=2
