"""EphemeralRunner: registration, secret, pod, status, deletion (real API server + fake GitHub)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, jit_data, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.kube import errors as kerrors
from gharc.kube.resources import PODS, SECRETS
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def test_runner_gets_registration_secret_pod_and_status(world: World) -> None:
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    assert er["metadata"]["finalizers"] == [
        c.FINALIZER_EPHEMERAL_RUNNER,
        c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
    ]
    secret = await world.kube.get(SECRETS, name, namespace=world.namespace)
    data = jit_data(secret)
    assert set(data) == {"jitToken", "runnerName", "runnerId", "scaleSetId"}
    assert int(data["runnerId"]) == er["status"]["runnerId"]
    assert data["runnerName"] == er["status"]["runnerName"] == name
    assert int(data["scaleSetId"]) == world.scale_set.id
    assert world.registered() == {er["status"]["runnerId"]}

    pod = await world.kube.get(PODS, name, namespace=world.namespace)
    [runner] = [x for x in pod["spec"]["containers"] if x["name"] == "runner"]
    env = {e["name"]: e for e in runner["env"]}
    assert env[c.ENV_RUNNER_JIT_CONFIG]["valueFrom"]["secretKeyRef"] == {
        "name": name,
        "key": "jitToken",
    }
    assert env[c.ENV_RUNNER_DEPRECATED_EXIT_CODE]["value"] == "1"
    assert env[c.ENV_RUNNER_EXTRA_USER_AGENT]["value"].startswith(c.USER_AGENT_PREFIX)
    assert pod["metadata"]["labels"][c.LABEL_EPHEMERAL_RUNNER] == "True"
    assert pod["metadata"]["labels"]["app"] == "runner"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == er["metadata"]["uid"]

    await world.run_pod(name)

    async def running() -> bool:
        st = (await world.runner(name)).get("status") or {}
        return st.get("phase") == "Running" and st.get("ready") is True

    await eventually(running, message="runner Running and ready")


async def test_deleting_a_runner_cleans_pod_secret_and_registration(world: World) -> None:
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    await world.kube.delete(EPHEMERAL_RUNNERS, name, namespace=world.namespace)

    async def gone() -> bool:
        try:
            await world.runner(name)
        except kerrors.NotFound:
            return True
        return False

    await eventually(gone, timeout=20, message="runner object gone")
    assert rid not in world.registered()
    assert rid in world.gh.state.removed_runners
    assert world.remove_calls() == 1
    for resource in (PODS, SECRETS):
        with pytest.raises(kerrors.NotFound):
            await world.kube.get(resource, name, namespace=world.namespace)


async def test_stale_registration_with_our_name_is_replaced(world: World) -> None:
    """AgentExists in the same scale set: the stale registration is removed, JIT retried."""
    st = world.gh.state
    tenant = st.tenant_from_config_url(world.gh.config_url())
    stale, _ = st.generate_jit_config(tenant, world.scale_set.id, "lonely-runner", "_work")
    await world.kube.create(
        EPHEMERAL_RUNNERS,
        {
            "metadata": {
                "name": "lonely-runner",
                "namespace": world.namespace,
                "finalizers": [
                    c.FINALIZER_EPHEMERAL_RUNNER,
                    c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
                ],
            },
            "spec": world.runner_spec(),
        },
    )

    async def registered() -> int:
        return int(((await world.runner("lonely-runner")).get("status") or {}).get("runnerId") or 0)

    rid = await eventually(registered, timeout=20, message="runner registered")
    assert rid != stale.id
    assert stale.id in st.removed_runners
    assert world.registered() == {rid}


async def test_proxy_secret_and_runner_proxy_env(world: World) -> None:
    await world.kube.create(
        SECRETS,
        {
            "metadata": {"name": "proxy-creds", "namespace": world.namespace},
            "stringData": {"username": "test", "password": "password"},
        },
    )
    ers = await world.create_ers(replicas=0)
    spec = world.runner_spec()
    spec["proxy"] = {
        "http": {"url": "http://proxy.example:3128", "credentialSecretRef": "proxy-creds"},
        # The controller's own GitHub calls honour spec.proxy too: the fake GitHub on
        # 127.0.0.1 is reached directly, and nothing leaves the machine.
        "noProxy": ["example.com", "example.org", "127.0.0.1"],
    }
    await world.kube.merge_patch(
        EPHEMERAL_RUNNER_SETS,
        ers,
        {"spec": {"ephemeralRunnerSpec": spec, "replicas": 1, "patchID": 1}},
    )
    [er] = await world.wait_runners(1)
    secret_name = c.ephemeral_runner_set_proxy_secret_name("set", world.namespace)
    assert er["spec"]["proxySecretRef"] == secret_name
    proxy = jit_data(await world.kube.get(SECRETS, secret_name, namespace=world.namespace))
    assert proxy == {
        "http_proxy": "http://test:password@proxy.example:3128",
        "https_proxy": "",
        "no_proxy": "example.com,example.org,127.0.0.1",
    }
    pod = await world.kube.get(PODS, er["metadata"]["name"], namespace=world.namespace)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["http_proxy"]["valueFrom"]["secretKeyRef"] == {
        "name": secret_name,
        "key": "http_proxy",
    }
    assert env["no_proxy"]["valueFrom"]["secretKeyRef"]["key"] == "no_proxy"
    assert "https_proxy" not in env

    await world.kube.delete(EPHEMERAL_RUNNER_SETS, "set", namespace=world.namespace)

    async def secret_gone() -> bool:
        try:
            await world.kube.get(SECRETS, secret_name, namespace=world.namespace)
        except kerrors.NotFound:
            return True
        return False

    await eventually(secret_gone, timeout=20, message="proxy secret deleted with the set")
    assert await world.runners(include_deleting=True) == []
