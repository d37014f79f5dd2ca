"""The two Kubernetes writes the listener makes, behind a small seam.

The listener's service account may only patch its EphemeralRunnerSet and EphemeralRunner
status (scaleset-controllers.md §8.3), so it needs no informers, no cache and no controller
machinery: two JSON merge patches. :class:`RunnerSetPatcher` is what the loop codes against,
so unit tests use a dict fake and the process uses :class:`KubePatcher`
(``kubernetes_asyncio``'s CustomObjectsApi, kubeconfig from ``$KUBECONFIG`` when set, else
in-cluster, via ``gharc.kube.config``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

import aiohttp

from gharc.api.scaleset.constants import (
    GROUP,
    PLURAL_EPHEMERAL_RUNNER_SETS,
    PLURAL_EPHEMERAL_RUNNERS,
    VERSION,
)

__all__ = ["KubePatchError", "KubePatcher", "RunnerNotFound", "RunnerSetPatcher", "job_status"]

log = logging.getLogger("gharc.listener.kube")

_MERGE_PATCH = "application/merge-patch+json"


class KubePatchError(Exception):
    """A patch failed; ``status`` is the HTTP status (None for a transport error)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RunnerNotFound(KubePatchError):
    """The EphemeralRunner named in a JobStarted message does not exist (any more)."""


class RunnerSetPatcher(Protocol):
    """What the listener writes to Kubernetes."""

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        """Merge-patch ``spec.replicas`` and ``spec.patchID`` of the EphemeralRunnerSet."""
        ...

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        """Merge-patch an EphemeralRunner's status; raise :class:`RunnerNotFound` on 404."""
        ...

    async def aclose(self) -> None: ...


class CleanupMarkerSource(Protocol):
    """Optional: where the listener learns that the set cleaned up finished runners."""

    def cleanup_markers(self) -> AsyncIterator[int]:
        """Each new ``status.finishedRunnerCleanupPatchID`` of the EphemeralRunnerSet."""
        ...


def job_status(
    *,
    runner_request_id: int,
    owner_name: str,
    repository_name: str,
    job_id: str,
    workflow_run_id: int,
    job_workflow_ref: str,
    job_display_name: str,
) -> dict[str, Any]:
    """The EphemeralRunner status fields a JobStarted message fills (ARC's field names).

    Empty values are left out, as ARC's ``omitempty`` merge patch does, so a sparse message
    never blanks a field.
    """
    fields: dict[str, Any] = {
        "jobRequestId": runner_request_id,
        "jobRepositoryName": f"{owner_name}/{repository_name}",
        "jobId": job_id,
        "workflowRunId": workflow_run_id,
        "jobWorkflowRef": job_workflow_ref,
        "jobDisplayName": job_display_name,
    }
    return {k: v for k, v in fields.items() if v not in ("", 0, None)}


class KubePatcher:
    """:class:`RunnerSetPatcher` over ``kubernetes_asyncio``; owns its ApiClient."""

    def __init__(self, api_client: Any, namespace: str, runner_set_name: str) -> None:
        from kubernetes_asyncio import client

        self._api_client = api_client
        self._api: Any = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.runner_set_name = runner_set_name

    @classmethod
    async def connect(cls, namespace: str, runner_set_name: str) -> KubePatcher:
        """Kubeconfig from ``$KUBECONFIG`` (or ~/.kube/config), else the service account."""
        from gharc.kube.config import new_api_client

        return cls(await new_api_client(pool_size=4), namespace, runner_set_name)

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        body = {"spec": {"replicas": replicas, "patchID": patch_id}}
        await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self._api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                PLURAL_EPHEMERAL_RUNNER_SETS,
                self.runner_set_name,
                body,
                _content_type=_MERGE_PATCH,
            ),
        )

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        await self._call(
            "EphemeralRunner",
            runner_name,
            self._api.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                PLURAL_EPHEMERAL_RUNNERS,
                runner_name,
                {"status": status},
                _content_type=_MERGE_PATCH,
            ),
        )

    async def cleanup_markers(self) -> AsyncIterator[int]:
        """Watch the own EphemeralRunnerSet (by name) and yield each new cleanup marker.

        Reconnects with a growing pause on errors; a 403 (an ARC-era Role without watch)
        ends the stream once with a warning, and the listener falls back to answering on
        its next message or long-poll timeout.
        """
        from kubernetes_asyncio import watch
        from kubernetes_asyncio.client import ApiException

        last: int | None = None
        pause = 0.5
        selector = f"metadata.name={self.runner_set_name}"
        while True:
            w = watch.Watch(return_type="object")
            try:
                async with w.stream(
                    self._api.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL_EPHEMERAL_RUNNER_SETS,
                    field_selector=selector,
                    timeout_seconds=300,
                ) as stream:
                    async for event in stream:
                        if event["type"] not in ("ADDED", "MODIFIED"):
                            continue
                        status = event["object"].get("status") or {}
                        marker = status.get("finishedRunnerCleanupPatchID")
                        if isinstance(marker, int) and marker != last:
                            last = marker
                            yield marker
                pause = 0.5
            except ApiException as err:
                if err.status == 403:
                    log.warning(
                        "may not watch EphemeralRunnerSet %s/%s (%s); cleanup markers are "
                        "answered on the next message instead",
                        self.namespace,
                        self.runner_set_name,
                        err.reason,
                    )
                    return
                log.info("EphemeralRunnerSet watch failed (%s); reconnecting", err.reason)
            except (OSError, TimeoutError, aiohttp.ClientError) as err:
                log.info("EphemeralRunnerSet watch interrupted (%r); reconnecting", err)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 30.0)

    async def _call(self, kind: str, name: str, request: Any) -> None:
        from kubernetes_asyncio.client import ApiException

        try:
            await request
        except ApiException as err:
            message = f"patch {kind} {self.namespace}/{name}: {err.status} {err.reason}"
            if err.status == 404 and kind == "EphemeralRunner":
                raise RunnerNotFound(message, 404) from None
            raise KubePatchError(message, err.status) from None
        except (OSError, TimeoutError, aiohttp.ClientError) as err:
            raise KubePatchError(f"patch {kind} {self.namespace}/{name}: {err!r}") from err

    async def aclose(self) -> None:
        await self._api_client.close()
