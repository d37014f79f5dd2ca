"""What gharc does to a listener another controller left: ARC's, in ARC's Pod layout.

The first controller runs in ``Pod`` mode with another listener image, as ARC's controller
leaves a scale set: an AutoscalingListener naming ARC's image, its pod, config Secret,
ServiceAccount, Role and RoleBinding. The second runs gharc's default, in-process listeners,
against the same fake GitHub. docs/migration-from-arc.md describes what this test shows:
the listener is recreated (its image differs), everything of the pod layout is deleted, and
the in-process listener takes the session, with an event on each object a user looks at.
"""

from __future__ import annotations

from typing import Any

from _arsworld import World, running_world

from gharc.api.scaleset import constants as c
from gharc.kube.resources import PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS
from testworld.sim.github import FakeGitHubServer
from testworld.wait import eventually

JSON = dict[str, Any]


async def _pod_layout(w: World, listener: str) -> dict[str, bool]:
    found = {}
    for resource, name in (
        (PODS, c.listener_pod_name(listener)),
        (SECRETS, c.listener_config_secret_name(listener)),
        (SERVICE_ACCOUNTS, c.listener_service_account_name(listener)),
        (ROLES, c.listener_role_name(listener)),
        (ROLE_BINDINGS, c.listener_role_binding_name(listener)),
    ):
        found[resource.plural] = await w.get_or_none(resource, name) is not None
    return found


async def test_a_pod_mode_listener_of_another_image_is_replaced_by_an_in_process_one(
    kubeconfig: str, namespace: str
) -> None:
    async with FakeGitHubServer(port=0, poll_timeout=1.0) as gh:
        async with running_world(
            kubeconfig, namespace, gh=gh, listener_image="arc-listener:0.14"
        ) as arc:
            ars = await arc.create_ars()
            name = arc.listener_name(ars)
            await arc.wait_listener_pod(ars, timeout=30)
            old = await arc.listener(ars)
            assert old is not None and old["spec"]["image"] == "arc-listener:0.14"
            layout = await _pod_layout(arc, name)
            assert all(layout.values()), layout
        async with running_world(
            kubeconfig, namespace, gh=gh, with_secret=False, listener_mode="InProcess"
        ) as w:

            async def running() -> JSON | None:
                listener = await w.listener(ars)
                status = (listener or {}).get("status") or {}
                ok = listener is not None and status.get("phase") == "Running"
                return (
                    listener
                    if ok and listener["metadata"]["uid"] != old["metadata"]["uid"]
                    else None
                )

            new = await eventually(running, timeout=60, message="in-process listener running")
            assert new["spec"]["image"] == "gharc:test"
            layout = await _pod_layout(w, name)
            assert not any(layout.values()), layout
            assert new["status"].get("sessionId")
            event = await w.wait_event("ListenerRecreated")
            assert "ServiceAccount" in event["message"]
