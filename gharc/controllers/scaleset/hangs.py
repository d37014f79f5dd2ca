"""Runners that hang after their job (ARC #4603: a runner process that did not exit after
its job held its slot for 7 hours).

An ephemeral runner de-registers itself when its job completes, then exits; its pod's exit
0 is what marks the EphemeralRunner Succeeded. A process that hangs instead keeps the pod
Running: the EphemeralRunner still counts toward the set's replicas (it is busy: a job is
recorded on it, so scale down spares it), and no watch event will ever say otherwise.

The registration reconcile (:mod:`orphans`) lists each scale set's registrations anyway;
a runner that took a job and whose registration is gone at GitHub has finished that job
(GitHub refuses to remove a busy runner). Seen so for ``timeout`` seconds with its pod
still up, it is finished here: status Succeeded (so the EphemeralRunnerSet's finished-runner
cleanup, behaviours B3, deletes it without making a replacement for the done job), its pod
deleted, a Warning event, and ``gharc_hung_runners_total`` counts it. The first sighting is
kept in memory: after a restart or a leader change the wait starts again, so a hang is
finished within ``timeout`` plus two reconcile intervals of the controller that sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from gharc.api.resources import EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import EphemeralRunnerView
from gharc.controllers.scaleset import runnerresources as rr
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.events import WARNING
from gharc.kube.resources import PODS

log = logging.getLogger(__name__)

JSON = dict[str, Any]

#: The ``--runner-hang-timeout`` default (why this value: its declaration).
DEFAULT_HANG_TIMEOUT = ScaleSetOptions.runner_hang_timeout

HUNG_RUNNERS = Counter(
    "gharc_hung_runners",
    "Runners whose process did not exit after their job, finished by the controller.",
    ["namespace"],
)


def looks_hung(er: JSON, registered: set[int]) -> bool:
    """A runner that took a job, is still Running, and is no longer registered at GitHub."""
    runner = EphemeralRunnerView(er)
    rid = runner.runner_id
    return bool(
        rid
        and rid not in registered
        and runner.has_job
        and not objects.is_deleting(er)
        and runner.is_running
    )


@dataclass(eq=False)
class HangReaper:
    """Finishes runners seen hung for ``timeout`` seconds (see the module docstring)."""

    kube: KubeClient
    recorder: EventRecorder | None
    timeout: float
    clock: Callable[[], float]
    _since: dict[str, float] = field(default_factory=dict)

    async def check(self, runners: Iterable[JSON], registered: set[int]) -> set[str]:
        """Look at one scale set's runners; returns the uids seen hung this time."""
        seen: set[str] = set()
        now = self.clock()
        for er in runners:
            if not looks_hung(er, registered):
                continue
            uid = str(objects.meta(er).get("uid") or "")
            seen.add(uid)
            since = self._since.setdefault(uid, now)
            if now - since >= self.timeout:
                await self._finish(er, now - since)
                self._since.pop(uid, None)
        return seen

    def keep_only(self, uids: set[str]) -> None:
        """Forget runners not seen hung in the last pass (they exited, or went away)."""
        self._since = {k: v for k, v in self._since.items() if k in uids}

    async def _finish(self, er: JSON, waited: float) -> None:
        runner = EphemeralRunnerView(er)
        ns, name = runner.namespace, runner.name
        message = (
            f"runner {runner.runner_id} finished job {runner.job_id} and left "
            f"GitHub, but its pod kept running for {waited:.0f}s more; deleting the pod"
        )
        # Status first: a pod gone while the runner still reads Running with a job would be
        # taken for a lost busy runner and replaced (a runner for a job already done).
        try:
            await self.kube.patch_status(
                EPHEMERAL_RUNNERS,
                er,
                rr.phase_status(c.PHASE_SUCCEEDED, "RunnerHung", message),
                optimistic_lock=True,
            )
        except (kerrors.NotFound, kerrors.Conflict):
            return  # gone, or changed since the cache saw it: the next pass looks again
        await self.kube.delete(PODS, c.runner_pod_name(name), namespace=ns, missing_ok=True)
        HUNG_RUNNERS.labels(namespace=ns).inc()
        await emit(self.recorder, er, WARNING, "RunnerHung", message)
        log.warning("%s/%s: %s", ns, name, message)
