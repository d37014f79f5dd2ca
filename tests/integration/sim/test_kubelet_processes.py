"""A crashed, evicted, OOM-killed or node-lost listener pod has no process left.

The listener pods of the test world run a real subprocess. A fault must kill it (its whole
process group) before the pod is reported terminated, as a container runtime does, or the
old listener keeps serving next to its successor; and a stopped kubelet leaves nothing.
The listener command is replaced by a stand-in that only sleeps, so a process found alive
afterwards can only be one the kubelet failed to kill.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testworld.sim.kubelet import KubeletSimulator
from testworld.sim.programs import ListenerProcessProgram
from testworld.wait import eventually


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line carries ``marker`` (zombies have none)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def listener_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "default",
            "containers": [{"name": "listener", "image": "gharc", "command": ["gharc"]}],
        },
    }


async def _running_listener(
    api_client: Any, namespace: str, kubelet: KubeletSimulator, name: str, marker: str
) -> list[int]:
    core = client.CoreV1Api(api_client)
    try:
        await core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except client.ApiException as err:
        if err.status != 409:
            raise
    await core.create_namespaced_pod(namespace, listener_pod(name))

    async def alive() -> list[int] | None:
        pids = processes_with(marker)
        return pids if len(pids) == 2 else None  # the listener and the process it forked

    return await eventually(alive, timeout=30, message="listener and its child started")


def _program(api_client: Any, marker: str) -> ListenerProcessProgram:
    # The stand-in forks a grandchild too: the kill must reach the whole group.
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', sys.argv[1]]); "
        "time.sleep(600)"
    )
    return ListenerProcessProgram(api_client, command=[sys.executable, "-c", script, marker])


FAULTS: dict[str, Callable[[KubeletSimulator, str, str], object]] = {
    "crash": lambda k, ns, name: k.crash(ns, name, exit_code=1),
    "evict": lambda k, ns, name: k.evict(ns, name),
    "oom_kill": lambda k, ns, name: k.oom_kill(ns, name),
    "node_loss": lambda k, ns, name: k.node_loss(ns),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_faulted_listener_pod_has_no_process_left(
    api_client: Any, namespace: str, fault: str
) -> None:
    marker = f"gharc-test-{uuid.uuid4().hex}"
    core = client.CoreV1Api(api_client)
    program = _program(api_client, marker)
    async with KubeletSimulator(
        api_client, programs=[lambda p, c: program], namespaces=[namespace]
    ) as kubelet:
        await _running_listener(api_client, namespace, kubelet, "listener", marker)
        FAULTS[fault](kubelet, namespace, "listener")

        async def failed() -> Any:
            pod = await core.read_namespaced_pod("listener", namespace)
            return pod if pod.status.phase == "Failed" else None

        await eventually(failed, timeout=20, message="pod Failed")
        # The status is written only once the process group is dead and reaped.
        assert processes_with(marker) == [], f"{fault}: the listener is still alive"


async def test_stopping_the_kubelet_waits_for_its_processes(
    api_client: Any, namespace: str
) -> None:
    marker = f"gharc-test-{uuid.uuid4().hex}"
    program = _program(api_client, marker)
    kubelet = KubeletSimulator(
        api_client, programs=[lambda p, c: program], namespaces=[namespace], max_grace_seconds=1
    )
    await kubelet.start()
    try:
        await _running_listener(api_client, namespace, kubelet, "listener", marker)
    finally:
        await kubelet.stop()
    assert processes_with(marker) == []
