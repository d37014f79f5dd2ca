"""RunnerDeployment -> RunnerReplicaSet -> Runner -> Pod on the real API server, with the
fake GitHub and simulated legacy runners (legacy.md 4.1-4.6, behaviours B5 and B6)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNERS
from gharc.kube.resources import PODS, SECRETS
from testworld.sim.github import DEFAULT_ORG

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace, api_client):
        yield w


def runner_env(pod: dict[str, Any]) -> dict[str, str]:
    [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
    return {e["name"]: e.get("value", "") for e in ctr["env"]}


async def test_a_deployment_of_two_creates_two_runners_and_pods_with_the_runner_env(
    world: World,
) -> None:
    await world.create_deployment(replicas=2, group="gpu-group")
    pods = await world.wait_registered(2)
    runners = await world.runners()
    assert sorted(r["metadata"]["name"] for r in runners) == sorted(
        x["metadata"]["name"] for x in pods
    )
    [rrs] = await world.replica_sets()
    assert rrs["metadata"]["name"].startswith("rd-")
    tokens = {t for t, _ in world.gh.state.registration_tokens.items()}
    for pod in pods:
        name = pod["metadata"]["name"]
        env = runner_env(pod)
        assert env["RUNNER_NAME"] == name
        assert env["RUNNER_ORG"] == DEFAULT_ORG
        assert env["RUNNER_REPO"] == "" and env["RUNNER_ENTERPRISE"] == ""
        assert env["RUNNER_LABELS"] == "linux"
        assert env["RUNNER_GROUP"] == "gpu-group"
        assert env["RUNNER_EPHEMERAL"] == "true"
        assert env["GITHUB_URL"] == world.gh.url + "/"
        assert env["RUNNER_WORKDIR"] == "/runner/_work"
        assert env["DOCKER_HOST"] == "unix:///run/docker.sock"
        # The token is in the runner's own Secret, not in the pod spec nor Runner status.
        assert env["RUNNER_TOKEN"] == ""
        [ctr] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
        [ref] = [e["valueFrom"]["secretKeyRef"] for e in ctr["env"] if e["name"] == "RUNNER_TOKEN"]
        secret = await world.kube.get(SECRETS, ref["name"], namespace=world.namespace)
        assert base64.b64decode(secret["data"][ref["key"]]).decode() in tokens
        assert secret["metadata"]["ownerReferences"][0]["kind"] == "Runner"
        runner = await world.kube.get(RUNNERS, name, namespace=world.namespace)
        assert "token" not in runner["status"]["registration"]
        assert [x["name"] for x in pod["spec"]["containers"]] == ["runner", "docker"]
        assert pod["spec"]["restartPolicy"] == "Never"
        assert c.FINALIZER_RUNNER_POD in pod["metadata"]["finalizers"]
        labels = pod["metadata"]["labels"]
        assert labels[c.LABEL_RUNNER] == ""
        assert labels[c.LABEL_RUNNER_DEPLOYMENT_NAME] == "rd"
        fake = [r for r in world.gh.state.runners.values() if r.name == name]
        assert pod["metadata"]["annotations"][c.ANNOTATION_RUNNER_ID] == str(fake[0].id)
    # One registration token for the scope, reused by both runners (B6).
    assert world.gh.calls("*/registration-token", method="POST") == 1
    rd = await until(
        lambda: _rd_with(world, "availableReplicas", 2), timeout=30, message="rd status"
    )
    assert rd["status"]["desiredReplicas"] == 2


async def _rd_with(world: World, key: str, value: int) -> dict[str, Any] | None:
    rd = await world.kube.get(RUNNER_DEPLOYMENTS, "rd", namespace=world.namespace)
    return rd if (rd.get("status") or {}).get(key) == value else None


async def test_a_template_change_rolls_out_a_new_replica_set_and_drains_the_old_one(
    world: World,
) -> None:
    await world.create_deployment(replicas=2, ephemeral=False)
    old = {x["metadata"]["name"] for x in await world.wait_registered(2)}
    [old_rrs] = await world.replica_sets()
    await world.kube.merge_patch(
        RUNNER_DEPLOYMENTS,
        "rd",
        {"spec": {"template": {"spec": {"labels": ["linux", "v2"]}}}},
        namespace=world.namespace,
    )

    async def rolled() -> list[dict[str, Any]] | None:
        sets = await world.replica_sets()
        runners = await world.runners()
        names = {r["metadata"]["name"] for r in runners}
        done = len(sets) == 1 and sets[0]["metadata"]["uid"] != old_rrs["metadata"]["uid"]
        return runners if done and len(runners) == 2 and not names & old else None

    runners = await until(rolled, timeout=60, interval=0.3, message="rollout")
    assert all(r["spec"]["labels"] == ["linux", "v2"] for r in runners)
    pods = await world.wait_registered(2)
    assert all(runner_env(x)["RUNNER_LABELS"] == "linux,v2" for x in pods)
    # The old static runners were unregistered from GitHub, not left dangling.
    assert world.remove_calls(status=204) == 2
    assert not {r.name for r in world.gh.state.runners.values()} & old


async def test_scale_down_drains_the_oldest_runner_and_keeps_the_newest(world: World) -> None:
    await world.create_deployment(replicas=1, ephemeral=False)
    await world.wait_registered(1)
    await world.scale_deployment(2)
    await world.wait_registered(2)
    # Oldest and newest by the Runners' creation time and name, as the controller orders
    # them: created within one second (creationTimestamp's resolution), the two tie on
    # time and the name decides, whichever was created first (clean-clone CI on an idle
    # machine drained the second-created runner for that reason).
    first_runner, newest = await world.runners()
    await world.scale_deployment(1)

    async def drained() -> list[dict[str, Any]] | None:
        runners = await world.runners()
        return runners if len(runners) == 1 else None

    [kept] = await until(drained, timeout=30, message="scale down to 1")
    assert kept["metadata"]["name"] == newest["metadata"]["name"]

    # The drained runner's pod and registration Secret are owned by its Runner alone, so
    # the garbage collector takes them (tests/realnode checks that it does).
    name = first_runner["metadata"]["name"]
    assert await world.orphaned(SECRETS, f"{name}-registration", first_runner)
    assert await world.orphaned(PODS, name, first_runner)
    assert await world.kube.get(
        SECRETS, f"{kept['metadata']['name']}-registration", namespace=world.namespace
    )


async def test_a_busy_runner_survives_scale_down_until_its_job_completes(world: World) -> None:
    await world.create_deployment(replicas=2, ephemeral=False)
    await world.wait_registered(2)
    # The oldest by its Runner's creation time and name, as the controller orders them: a
    # pod can be stamped a second later than its Runner, so the pods' order may differ.
    oldest_runner = (await world.runners())[0]
    oldest = oldest_runner["metadata"]["name"]
    world.programs[oldest].start_job()
    await world.scale_deployment(1)

    async def refused() -> bool:
        return world.remove_calls(status=422) >= 2

    await until(refused, timeout=30, message="RemoveRunner refused while busy")
    names = {r["metadata"]["name"] for r in await world.runners()}
    assert oldest in names, "a busy runner was deleted"
    pod = next(x for x in await world.pods() if x["metadata"]["name"] == oldest)
    ann = pod["metadata"]["annotations"]
    assert "still running a job" in ann[c.ANNOTATION_UNREGISTRATION_FAILURE_MESSAGE]
    assert c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP not in ann

    world.programs[oldest].finish_job()

    async def gone() -> bool:
        names = {r["metadata"]["name"] for r in await world.runners()}
        return oldest not in names and await world.orphaned(PODS, oldest, oldest_runner)

    await until(gone, timeout=30, message="drained runner deleted after its job")
    [pod] = [x for x in await world.pods(live_only=False) if x["metadata"]["name"] == oldest]
    assert c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP in pod["metadata"]["annotations"]
    assert world.remove_calls(status=204) == 1
    assert len(await world.runners()) == 1


async def test_a_completed_ephemeral_runner_is_replaced_without_a_remove_runner_call(
    world: World,
) -> None:
    await world.create_deployment(replicas=1)
    [pod] = await world.wait_registered(1)
    first = pod["metadata"]["name"]
    first_runner = await world.kube.get(RUNNERS, first, namespace=world.namespace)
    world.programs[first].start_job()
    world.programs[first].finish_job()  # the job ends; the runner exits by itself

    async def replaced() -> list[dict[str, Any]] | None:
        pods = await world.pods()
        names = {x["metadata"]["name"] for x in pods}
        gone = await world.orphaned(PODS, first, first_runner)
        return pods if gone and first not in names and len(pods) == 1 else None

    await until(replaced, timeout=30, message="completed runner replaced")
    await world.wait_registered(1)
    assert world.remove_calls() == 0


@pytest.mark.parametrize("replicas", [1, 50])
async def test_list_runners_calls_scale_with_scopes_not_runners(
    world: World, replicas: int
) -> None:
    await world.create_deployment(replicas=replicas, ephemeral=False)
    await world.wait_registered(replicas, timeout=120)
    calls = world.list_calls()
    # One scope: the answer is cached (max-age=1 s here) and shared by every runner, so
    # the calls track elapsed seconds, never one per runner.
    assert calls <= 20, f"{calls} List Runners calls for {replicas} runners"
