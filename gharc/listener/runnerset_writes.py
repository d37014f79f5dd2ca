"""The listener's Kubernetes writes, behind a small seam, over ``gharc.kube``'s client.

The listener's service account may only patch its EphemeralRunnerSet and EphemeralRunner
status (scaleset-controllers.md §8.3), so it needs no informers and no controller machinery:
two JSON merge patches, one annotation for the message session, and (optionally) a watch of
its own EphemeralRunnerSet for cleanup markers. :class:`RunnerSetPatcher` is what the loop
codes against, so unit tests use a dict fake; both the listener process and the controller's
in-process listeners use :class:`KubePatcher` over :class:`gharc.kube.client.KubeClient`
(one client, one error vocabulary, one request counter for every Kubernetes call gharc makes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import scaling_wire as wire
from gharc.api.scaleset.constants import ANNOTATION_MESSAGE_SESSION_ID
from gharc.api.scaleset.views import EphemeralRunnerSetView
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient

__all__ = [
    "KubePatchError",
    "KubePatcher",
    "RunnerNotFound",
    "RunnerSetPatcher",
    "StaleStatistics",
    "job_status",
]

log = logging.getLogger("gharc.listener.runnerset_writes")


class KubePatchError(Exception):
    """A Kubernetes call failed; ``status`` is the HTTP status (None for a transport error)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RunnerNotFound(KubePatchError):
    """The EphemeralRunner named in a JobStarted message does not exist (any more)."""


class StaleStatistics(Exception):
    """The set cleaned up finished runners after the statistics a patch was built on were
    read: the count may still hold a job that finished (B3). ``marker`` is the set's
    cleanup marker now; statistics read after this point include that job."""

    def __init__(self, marker: int | None) -> None:
        super().__init__(f"cleanup marker is now {marker}")
        self.marker = marker


class RunnerSetPatcher(Protocol):
    """What the listener writes to Kubernetes."""

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        """Merge-patch ``spec.replicas`` and ``spec.patchID`` of the EphemeralRunnerSet."""
        ...

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        """Merge-patch an EphemeralRunner's status; raise :class:`RunnerNotFound` on 404."""
        ...

    async def aclose(self) -> None: ...


class SessionRecord(Protocol):
    """Optional: where a listener leaves its message session id for its successor.

    A listener that dies without deleting its session (SIGKILL, OOM, node loss, a lost
    leader) leaves the session alive at GitHub, and the service refuses a second one with
    409 until it expires. Its successor reads the id recorded here and takes the session
    over instead of waiting minutes for the expiry.
    """

    async def recorded_session(self) -> str | None: ...

    async def record_session(self, session_id: str | None) -> None: ...


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


def marker_of(runner_set: dict[str, Any]) -> int | None:
    """The cleanup marker of an EphemeralRunnerSet object, if it has one: read by
    :class:`EphemeralRunnerSetView`, as the controller that writes it reads it."""
    return EphemeralRunnerSetView(runner_set).cleanup_marker


class KubePatcher:
    """:class:`RunnerSetPatcher`, :class:`SessionRecord` and a marker watch over a KubeClient.

    ``kube`` is either a :class:`KubeClient` (shared: the controller's) or a
    kubernetes_asyncio ApiClient (wrapped; closed by :meth:`aclose`).
    """

    def __init__(self, kube: Any, namespace: str, runner_set_name: str) -> None:
        self._owns = not isinstance(kube, KubeClient)
        self.kube: KubeClient = (
            kube if isinstance(kube, KubeClient) else KubeClient(kube, owns_api_client=True)
        )
        self.namespace = namespace
        self.runner_set_name = runner_set_name

    @classmethod
    async def connect(cls, namespace: str, runner_set_name: str) -> KubePatcher:
        """Kubeconfig from ``$KUBECONFIG`` (or ~/.kube/config), else the service account."""
        kube = await KubeClient.from_config(pool_size=4, field_manager="gharc-listener", lean=True)
        patcher = cls(kube, namespace, runner_set_name)
        patcher._owns = True
        return patcher

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        body = wire.replicas_patch(replicas, patch_id)
        await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self.kube.merge_patch(
                EPHEMERAL_RUNNER_SETS, self.runner_set_name, body, namespace=self.namespace
            ),
        )

    async def patch_replicas_after(self, replicas: int, patch_id: int, marker: int) -> None:
        """Patch the count only if ``status.finishedRunnerCleanupPatchID`` is still
        ``marker``, the one known before the count's statistics were read; raise
        :class:`StaleStatistics` when it moved (a JSON patch ``test``, answered 422)."""
        ops = wire.replicas_after_marker_ops(replicas, patch_id, marker)

        async def send() -> bool:
            try:
                await self.kube.json_patch(
                    EPHEMERAL_RUNNER_SETS, self.runner_set_name, ops, namespace=self.namespace
                )
            except kerrors.Invalid:
                return False
            return True

        if await self._call("EphemeralRunnerSet", self.runner_set_name, send()):
            return
        obj = await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self.kube.get(EPHEMERAL_RUNNER_SETS, self.runner_set_name, namespace=self.namespace),
        )
        raise StaleStatistics(marker_of(obj))

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        await self._call(
            "EphemeralRunner",
            runner_name,
            self.kube.patch_status(
                EPHEMERAL_RUNNERS, runner_name, {"status": status}, namespace=self.namespace
            ),
        )

    async def recorded_session(self) -> str | None:
        obj = await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self.kube.get(EPHEMERAL_RUNNER_SETS, self.runner_set_name, namespace=self.namespace),
        )
        annotations = objects.meta(obj).get("annotations") or {}
        return annotations.get(ANNOTATION_MESSAGE_SESSION_ID) or None

    async def current_patch_id(self) -> int | None:
        """``spec.patchID`` of the EphemeralRunnerSet now (a predecessor's last patch; 0,
        "no patch", when unset or unreadable, as the controller reads it)."""
        obj = await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self.kube.get(EPHEMERAL_RUNNER_SETS, self.runner_set_name, namespace=self.namespace),
        )
        return EphemeralRunnerSetView(obj).patch_id

    async def record_session(self, session_id: str | None) -> None:
        body = {"metadata": {"annotations": {ANNOTATION_MESSAGE_SESSION_ID: session_id}}}
        await self._call(
            "EphemeralRunnerSet",
            self.runner_set_name,
            self.kube.merge_patch(
                EPHEMERAL_RUNNER_SETS, self.runner_set_name, body, namespace=self.namespace
            ),
        )

    async def cleanup_markers(self) -> AsyncIterator[int]:
        """Watch the own EphemeralRunnerSet (by name) and yield each new cleanup marker.

        Reconnects with a growing pause on errors; a 403 (an ARC-era Role without watch)
        ends the stream once with a warning, and the listener falls back to answering on
        its next message or long-poll timeout.
        """
        last: int | None = None
        pause = 0.5
        selector = f"metadata.name={self.runner_set_name}"
        while True:
            try:
                async for event in self.kube.watch(
                    EPHEMERAL_RUNNER_SETS,
                    namespace=self.namespace,
                    field_selector=selector,
                    allow_bookmarks=False,
                    timeout_seconds=300,
                ):
                    if event.get("type") not in ("ADDED", "MODIFIED"):
                        continue
                    marker = marker_of(event.get("object") or {})
                    if marker is not None and marker != last:
                        last = marker
                        yield marker
                pause = 0.5
            except kerrors.Forbidden as err:
                log.warning(
                    "may not watch EphemeralRunnerSet %s/%s (%s); cleanup markers are "
                    "answered on the next message instead",
                    self.namespace,
                    self.runner_set_name,
                    err,
                )
                return
            except (kerrors.ApiError, OSError, TimeoutError, ValueError) as err:
                log.info("EphemeralRunnerSet watch interrupted (%r); reconnecting", err)
            except Exception as err:  # aiohttp's transport errors are not OSErrors
                log.info("EphemeralRunnerSet watch interrupted (%r); reconnecting", err)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 30.0)

    async def _call(self, kind: str, name: str, request: Any) -> Any:
        try:
            return await request
        except kerrors.NotFound as err:
            message = f"{kind} {self.namespace}/{name}: 404 {err}"
            if kind == "EphemeralRunner":
                raise RunnerNotFound(message, 404) from None
            raise KubePatchError(message, 404) from None
        except kerrors.ApiError as err:
            status = getattr(err, "status", None)
            message = f"{kind} {self.namespace}/{name}: {status} {err}"
            raise KubePatchError(message, status) from None
        except (OSError, TimeoutError) as err:
            raise KubePatchError(f"{kind} {self.namespace}/{name}: {err!r}") from err
        except Exception as err:
            if type(err).__module__.startswith("aiohttp"):
                raise KubePatchError(f"{kind} {self.namespace}/{name}: {err!r}") from err
            raise

    async def aclose(self) -> None:
        if self._owns:
            await self.kube.close()
