"""``gharc release -n <namespace>`` touches that namespace only.

The session annotation names the session a successor still has to delete; removing it from
a set whose session was not deleted (another namespace's, left out on purpose) would leave
that session open at GitHub with nothing pointing at it, and ARC's listener blocked by 409
until the service drops it. The same holds for another namespace's GitHub Secret
finalizer, which that namespace's owner may still want.
"""

from __future__ import annotations

from typing import Any, cast

from gharc.api.resources import AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.release import release_all
from gharc.github.pool import ClientPool
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import Resource

JSON = dict[str, Any]


def _obj(kind: str, namespace: str, annotations: dict[str, str]) -> JSON:
    return {
        "kind": kind,
        "metadata": {"name": "arc", "namespace": namespace, "annotations": dict(annotations)},
        "spec": {},
    }


class _Kube:
    """Lists by namespace as the API server does; records every patch; has no Secrets."""

    def __init__(self, objects: dict[Resource, list[JSON]]) -> None:
        self.objects = objects
        self.patched: list[tuple[str, str]] = []

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: Any = None,
        field_selector: str | None = None,
    ) -> list[JSON]:
        return [
            o
            for o in self.objects.get(resource, [])
            if namespace is None or o["metadata"]["namespace"] == namespace
        ]

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        raise kerrors.NotFound(f"{resource.plural} {namespace}/{name}")

    async def merge_patch(self, resource: Resource, obj: JSON, patch: JSON, **_: Any) -> JSON:
        self.patched.append((obj["kind"], obj["metadata"]["namespace"]))
        return obj


async def test_release_of_one_namespace_leaves_the_others_marks() -> None:
    other = {
        c.ANNOTATION_MESSAGE_SESSION_ID: "session-of-team-b",
        c.ANNOTATION_PROTECTED_GITHUB_SECRET: "github-secret",
    }
    kube = _Kube(
        {
            EPHEMERAL_RUNNER_SETS: [
                _obj("EphemeralRunnerSet", "team-a", {}),
                _obj("EphemeralRunnerSet", "team-b", other),
            ],
            AUTOSCALING_RUNNER_SETS: [
                _obj("AutoscalingRunnerSet", "team-a", {}),
                _obj("AutoscalingRunnerSet", "team-b", other),
            ],
        }
    )
    pool = ClientPool()
    try:
        report = await release_all(cast(KubeClient, kube), pool, namespace="team-a")
    finally:
        await pool.aclose()
    assert kube.patched == []
    assert (report.annotations_removed, report.secrets_released) == (0, 0)


async def test_release_of_all_namespaces_still_releases_every_secret() -> None:
    marked = {c.ANNOTATION_PROTECTED_GITHUB_SECRET: "github-secret"}
    kube = _Kube(
        {
            AUTOSCALING_RUNNER_SETS: [
                _obj("AutoscalingRunnerSet", "team-a", marked),
                _obj("AutoscalingRunnerSet", "team-b", marked),
            ],
        }
    )
    pool = ClientPool()
    try:
        report = await release_all(cast(KubeClient, kube), pool)
    finally:
        await pool.aclose()
    assert sorted(kube.patched) == [
        ("AutoscalingRunnerSet", "team-a"),
        ("AutoscalingRunnerSet", "team-b"),
    ]
    assert report.secrets_released == 2
