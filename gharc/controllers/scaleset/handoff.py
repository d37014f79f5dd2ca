"""Stopping for good: leave ARC's objects as ARC would have them (``--release-sessions-on-stop``).

gharc marks ARC's objects with things ARC does not know, each for a reason that holds only
while gharc runs:

* ``actions.github.com/message-session-id`` on every EphemeralRunnerSet, so a successor
  gharc resumes the session. ARC compares the set's annotations with exactly the ones it
  wants and patches the set's metadata on every reconcile while an extra one is there
  (252-430 extra writes per run were measured after a rollback);
* ``actions.github.com/protected-github-secret`` on every AutoscalingRunnerSet and the
  ``actions.github.com/github-secret-protection`` finalizer on its GitHub Secret. ARC never
  removes that finalizer, so after a rollback the Secret could not be deleted.

The sessions themselves are released by the :class:`~gharc.listener.host.ListenerHost`
(it knows each one's credentials); :class:`Handoff` removes the marks. Both run as
leader-only runnables whose ``stop`` does the work: the manager stops runnables before it
releases the lease, so no other gharc replica holds a session or reconciles these objects
while they are released. Why a flag and not "always on stop": a rolling upgrade stops
gharc too, and its successor gharc resumes the sessions without a new session or a
message delivered twice; only the user knows the successor is ARC (or nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gharc.api.resources import AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient, Reader
from gharc.kube.events import NORMAL
from gharc.kube.finalizers import remove_finalizer
from gharc.kube.resources import SECRETS

__all__ = ["REASON_RELEASED", "REASON_SESSION_RELEASED", "Handoff"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]

#: Event on an EphemeralRunnerSet whose message session was deleted on a stop for good.
REASON_SESSION_RELEASED = "MessageSessionReleased"
#: Event on an AutoscalingRunnerSet whose GitHub Secret finalizer was removed.
REASON_RELEASED = "ReleasedByGharc"
#: The whole release is bounded, so it fits the pod's grace period (45 s with the flag).
RELEASE_TIMEOUT = 15.0


class Handoff:
    """A leader-only runnable that, on stop, removes gharc's own marks from ARC's objects.

    ``sweep_sessions`` (in-process listeners only) also removes a session annotation the
    host did not release (a set whose listener was not running on this leader): listener
    pods in ``Pod`` mode keep their sessions until their own stop, which removes it.
    """

    need_leader_election = True

    def __init__(
        self,
        kube: KubeClient,
        cache: Reader,
        recorder: EventRecorder | None,
        *,
        sweep_sessions: bool,
        timeout: float = RELEASE_TIMEOUT,
        release_allowed: Callable[[], bool] | None = None,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.recorder = recorder
        self.sweep_sessions = sweep_sessions
        self.timeout = timeout
        self.release_allowed = release_allowed or (lambda: True)
        """False when the stop is a lost lease: the new leader reconciles these objects."""
        self.after = after
        """Awaited before the release: the reconcilers' in-flight work, which could write a
        mark again (the Secret finalizer), has finished."""
        self._stopped = asyncio.Event()
        self.released_annotations = 0
        self.released_secrets = 0

    async def start(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        self._stopped.set()
        if not self.release_allowed():
            log.warning("lease lost: leaving the release to the replica that holds it now")
            return
        if self.after is not None:
            await self.after()
        try:
            await asyncio.wait_for(self.release(), self.timeout)
        except TimeoutError:
            log.warning("releasing gharc's marks on ARC's objects timed out")

    async def release(self) -> None:
        """Remove every mark; each object independently, failures logged, never raised."""
        jobs = []
        if self.sweep_sessions:
            for ers in await self.cache.list(EPHEMERAL_RUNNER_SETS):
                if c.ANNOTATION_MESSAGE_SESSION_ID in (objects.meta(ers).get("annotations") or {}):
                    jobs.append(self._drop_session_annotation(ers))
        for ars in await self.cache.list(AUTOSCALING_RUNNER_SETS):
            if c.ANNOTATION_PROTECTED_GITHUB_SECRET in (objects.meta(ars).get("annotations") or {}):
                jobs.append(self._release_secret(ars))
        await asyncio.gather(*jobs, return_exceptions=True)
        log.info(
            "released for the next controller: %d session annotations, %d Secret finalizers",
            self.released_annotations,
            self.released_secrets,
        )

    async def session_released(self, runner_set: tuple[str, str], session_id: str) -> None:
        """The host deleted ``runner_set``'s session: say so on the EphemeralRunnerSet."""
        ns, name = runner_set
        try:
            ers = await self.cache.get(EPHEMERAL_RUNNER_SETS, name, namespace=ns)
        except kerrors.NotFound:
            try:
                ers = await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=ns)
            except kerrors.ApiError as err:
                log.info("no event for the released session of %s/%s: %s", ns, name, err)
                return
        await emit(
            self.recorder,
            ers,
            NORMAL,
            REASON_SESSION_RELEASED,
            f"message session {session_id} deleted: the controller stopped with "
            "--release-sessions-on-stop, so the next listener creates its own at once",
        )

    async def _drop_session_annotation(self, ers: JSON) -> None:
        try:
            await self.kube.merge_patch(
                EPHEMERAL_RUNNER_SETS,
                ers,
                {"metadata": {"annotations": {c.ANNOTATION_MESSAGE_SESSION_ID: None}}},
            )
        except (kerrors.NotFound, kerrors.ApiError) as err:
            log.warning("removing the session annotation of %s failed: %s", _name(ers), err)
            return
        self.released_annotations += 1

    async def _release_secret(self, ars: JSON) -> None:
        """Finalizer off the recorded Secret, then the record off the AutoscalingRunnerSet."""
        ns = str(objects.meta(ars).get("namespace"))
        name = str(
            (objects.meta(ars).get("annotations") or {}).get(c.ANNOTATION_PROTECTED_GITHUB_SECRET)
        )
        try:
            with contextlib.suppress(kerrors.NotFound):
                secret = await self.kube.get(SECRETS, name, namespace=ns)
                await remove_finalizer(
                    self.kube, SECRETS, secret, c.FINALIZER_GITHUB_SECRET_PROTECTION
                )
            await self.kube.merge_patch(
                AUTOSCALING_RUNNER_SETS,
                ars,
                {"metadata": {"annotations": {c.ANNOTATION_PROTECTED_GITHUB_SECRET: None}}},
            )
        except (kerrors.NotFound, kerrors.ApiError) as err:
            log.warning("releasing the GitHub Secret of %s failed: %s", _name(ars), err)
            return
        self.released_secrets += 1
        await emit(
            self.recorder,
            ars,
            NORMAL,
            REASON_RELEASED,
            f"finalizer {c.FINALIZER_GITHUB_SECRET_PROTECTION} removed from Secret {name}: "
            "the controller stopped with --release-sessions-on-stop",
        )


def _name(obj: JSON) -> str:
    return f"{objects.meta(obj).get('namespace')}/{objects.meta(obj).get('name')}"
