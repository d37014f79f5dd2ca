"""``gharc release``: what ``--release-sessions-on-stop`` does, for a controller already gone.

A gharc stopped without the flag left each scale set's message session open at GitHub and
its id on the EphemeralRunnerSet. If ARC is to take over before the service drops those
sessions (about two minutes), or gharc's marks must go (the session annotation ARC keeps
patching around, the GitHub Secret finalizer ARC never removes), this one-shot command does
the release from outside: it deletes each recorded session with the credentials the set's
runners use (``spec.ephemeralRunnerSpec``: URL, Secret, proxy, TLS), then removes the marks
as :class:`~gharc.controllers.scaleset.handoff.Handoff` does.

Run it only while no gharc controller runs: a running listener would find its session gone,
create a new one and record it again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import EphemeralRunnerSetView
from gharc.controllers.scaleset.credentials import ClientResolver, GitHubTarget
from gharc.controllers.scaleset.handoff import Handoff
from gharc.github import errors as gherrors
from gharc.github.pool import ClientPool
from gharc.kube import objects
from gharc.kube.client import KubeClient, Reader
from gharc.kube.resources import Resource

JSON = dict[str, Any]

__all__ = ["ReleaseReport", "release_all", "run_release"]

log = logging.getLogger(__name__)


@dataclass
class ReleaseReport:
    """What one ``gharc release`` did."""

    sessions_deleted: int = 0
    sessions_failed: int = 0
    annotations_removed: int = 0
    secrets_released: int = 0


async def release_all(
    kube: KubeClient, pool: ClientPool, *, namespace: str | None = None
) -> ReleaseReport:
    """Delete every recorded session (of ``namespace``, or all), then gharc's marks.

    A session whose delete fails keeps its annotation, so running the command again (or
    waiting for the service to drop it) finishes the job; the rest are released anyway.
    """
    report = ReleaseReport()
    resolver = ClientResolver(kube, pool)
    failed: set[tuple[str, str]] = set()
    for ers in await kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace):
        session_id = (objects.meta(ers).get("annotations") or {}).get(
            c.ANNOTATION_MESSAGE_SESSION_ID
        )
        if not session_id:
            continue
        view = EphemeralRunnerSetView(ers)
        key = _key(ers)
        try:
            client = await resolver.client_for(GitHubTarget.from_spec(key[0], view.runner_spec))
            await client.delete_message_session(view.scale_set_id, str(session_id))
        except gherrors.GitHubError as err:
            if err.status not in (400, 404):  # gone already: nothing to delete
                log.warning("deleting session %s of %s/%s failed: %s", session_id, *key, err)
                failed.add(key)
                continue
        except Exception as err:
            log.warning("deleting session %s of %s/%s failed: %s", session_id, *key, err)
            failed.add(key)
            continue
        report.sessions_deleted += 1
        log.info("message session %s of %s/%s deleted", session_id, *key)
    report.sessions_failed = len(failed)
    handoff = Handoff(kube, _Without(kube, failed, namespace), None, sweep_sessions=True)
    await handoff.release()
    report.annotations_removed = handoff.released_annotations
    report.secrets_released = handoff.released_secrets
    return report


class _Without(Reader):
    """A reader that hides the EphemeralRunnerSets whose session could not be deleted, so
    their annotation stays and names the session still to release, and that lists only
    ``namespace`` when one was given: :class:`Handoff` lists every namespace, and another
    namespace's session annotation (its session not deleted here) or Secret finalizer is not
    this run's to remove."""

    def __init__(
        self, kube: KubeClient, hidden: set[tuple[str, str]], namespace: str | None = None
    ) -> None:
        self.kube = kube
        self.hidden = hidden
        self.namespace = namespace

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        return await self.kube.get(resource, name, namespace=namespace)

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
    ) -> list[JSON]:
        items = await self.kube.list(
            resource,
            namespace=namespace if namespace is not None else self.namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        if resource is not EPHEMERAL_RUNNER_SETS:
            return items
        return [o for o in items if _key(o) not in self.hidden]


def _key(obj: JSON) -> tuple[str, str]:
    m = objects.meta(obj)
    return str(m.get("namespace")), str(m.get("name"))


async def run_release(kubeconfig: str | None, namespace: str | None) -> int:
    """The command: 0 when every recorded session is released, 1 when some are left."""
    kube = await KubeClient.from_config(kubeconfig=kubeconfig, field_manager="gharc-release")
    pool = ClientPool(user_agent=f"{c.USER_AGENT_PREFIX}gharc-release")
    try:
        report = await release_all(kube, pool, namespace=namespace)
    finally:
        await pool.aclose()
        await kube.close()
    print(
        f"sessions deleted: {report.sessions_deleted}, left (delete failed; run again): "
        f"{report.sessions_failed}, session annotations removed: "
        f"{report.annotations_removed}, Secret finalizers removed: {report.secrets_released}"
    )
    return 1 if report.sessions_failed else 0
