"""Graceful stop of one runner pod (ARC ``runner_graceful_stop.go``, legacy.md 4.5).

The pod is safe to delete only after ``unregistration-complete-timestamp``. Getting there
never kills a job: a busy runner makes RemoveRunner answer 422 and we wait; a runner that
has not registered yet is given up to the registration timeout first (B5), so GitHub never
assigns a job to a runner that is being torn down; a stopped pod (an ephemeral runner that
finished its job) has already de-registered itself and costs no API call.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gharc.api.legacy import constants as c
from gharc.controllers.legacy import pods as p
from gharc.controllers.legacy.options import LegacyOptions
from gharc.github import errors as gherrors
from gharc.github.rest import RestClient
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.reconcile import Result
from gharc.kube.resources import PODS

log = logging.getLogger(__name__)
JSON = dict[str, Any]

#: How long past a pod's deletion deadline its kubelet may still report: after that no
#: kubelet is answering for it (a lost node), so no runner container starts there again.
SILENT_KUBELET_MARGIN = dt.timedelta(seconds=10)


@dataclass
class StopOutcome:
    """``pod`` as last written; ``retry`` is None when unregistration is complete."""

    pod: JSON
    retry: Result | None


async def annotate_once(kube: KubeClient, pod: JSON, key: str, value: str) -> JSON:
    """Set an annotation unless it is already present (first writer wins, like ARC)."""
    if key in objects.annotations_of(pod):
        return pod
    return await kube.merge_patch(PODS, pod, {"metadata": {"annotations": {key: value}}})


async def find_runner_id(client: RestClient, name: str, *, fresh: bool = False) -> int | None:
    """The GitHub runner ID by name, from the (cached, per-scope) List Runners answer, or
    from GitHub itself when ``fresh``."""
    for runner in await client.list_runners(fresh=fresh):
        if runner.name == name:
            return runner.id
    return None


class GracefulStop:
    def __init__(
        self,
        kube: KubeClient,
        options: LegacyOptions,
        exited_before_deletion: Callable[[JSON], bool] = lambda _pod: False,
    ) -> None:
        self.kube = kube
        self.options = options
        self.exited_before_deletion = exited_before_deletion

    def _retry(self) -> Result:
        return Result(requeue_after=self.options.unregistration_retry_delay.total_seconds())

    async def tick(self, pod: JSON, client: RestClient) -> StopOutcome:
        """ARC ``tickRunnerGracefulStop``: start mark, unregister, complete mark."""
        now = self.options.clock()
        pod = await annotate_once(
            self.kube, pod, c.ANNOTATION_UNREGISTRATION_START_TIMESTAMP, objects.format_time(now)
        )
        pod, retry = await self._unregister(pod, client)
        if retry is not None:
            return StopOutcome(pod, retry)
        pod = await annotate_once(
            self.kube,
            pod,
            c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP,
            objects.format_time(self.options.clock()),
        )
        return StopOutcome(pod, None)

    async def _unregister(self, pod: JSON, client: RestClient) -> tuple[JSON, Result | None]:
        """ARC ``ensureRunnerUnregistration``: the first matching rule of the table wins."""
        ann = objects.annotations_of(pod)
        name = str(pod["metadata"]["name"])
        if c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP in ann:
            return pod, None  # 1
        exited = p.is_stopped(pod)
        # Rule 6 is for a runner that exited after its job; one stopped by this pod's
        # deletion went offline and is still registered.
        deregistered = exited and (
            self.exited_before_deletion(pod) or not p.stopped_by_deletion(pod)
        )
        runner_id: int | None = None
        if ann.get(c.ANNOTATION_RUNNER_ID, "").isdigit():
            runner_id = int(ann[c.ANNOTATION_RUNNER_ID])
        elif not deregistered:
            runner_id = await find_runner_id(client, name)
        now = self.options.clock()
        timed_out = p.registration_timed_out(pod, now, self.options.registration_timeout)
        pending = p.phase(pod) == "Pending"
        if runner_id is None:
            if not exited and not timed_out and not pending:
                log.info("pod %s: waiting for the runner to register before unregistering", name)
                return pod, self._retry()  # 2
            log.info(
                "pod %s: no runner registered under its name (%s); nothing to remove",
                name,
                "stopped" if exited else "timed out" if timed_out else "pending",
            )
            return pod, None  # 3, 4, 5: nothing registered, nothing to remove
        if deregistered:
            log.info("pod %s: runner %d exited by itself and de-registered", name, runner_id)
            return pod, None  # 6: an exited runner has de-registered itself (B5)
        if c.ANNOTATION_RUNNER_COMPLETION_WAIT_START_TIMESTAMP in ann and not exited:
            ephemeral = (p.runner_env(pod) or {}).get(c.ENV_RUNNER_EPHEMERAL) == "true"
            if not ephemeral or not p.runner_container_terminated_before(pod):
                return pod, self._retry()  # 7
            return pod, None
        return await self._remove(pod, client, runner_id)  # 8

    async def after_deletion(self, pod: JSON, client: RestClient) -> Result | None:
        """For a pod that restarts its runner: remove what registered since the stop.

        Whatever the earlier decision (an exit seen, a 404, an unregistration finished
        before a scale-down's delete), the kubelet may have started the runner container
        again meanwhile, and that runner registered under the pod's name: a registration
        no rule knows of, left offline once the pod is gone. So before the pod may go, wait
        until the kubelet will not start the container again, then ask GitHub (not the
        cache) for the name once more.
        """
        if not p.restarts_runner(pod):
            return None
        now = self.options.clock()
        if not p.stopped_for_good(pod, now, SILENT_KUBELET_MARGIN):
            return self._retry()
        name = str(pod["metadata"]["name"])
        runner_id = await find_runner_id(client, name, fresh=True)
        if runner_id is None:
            return None
        log.info("pod %s: runner %d registered again after its stop", name, runner_id)
        _, retry = await self._remove(pod, client, runner_id)
        return retry

    async def _remove(
        self, pod: JSON, client: RestClient, runner_id: int
    ) -> tuple[JSON, Result | None]:
        name = str(pod["metadata"]["name"])
        try:
            await client.remove_runner(runner_id)
        except gherrors.RateLimited:
            return pod, Result(requeue_after=self.options.rate_limit_retry_delay.total_seconds())
        except gherrors.Forbidden as err:
            log.warning(
                "pod %s: no permission to remove runner %d (%s); treating as removed",
                name,
                runner_id,
                err,
            )
            return pod, None
        except gherrors.NotFound:
            # Gone from GitHub; but a restarted runner container registers again under the
            # pod's name with a new id, which the annotation does not name.
            again = await find_runner_id(client, name, fresh=True)
            if again is not None and again != runner_id:
                return await self._remove(pod, client, again)
            return pod, None
        except gherrors.UnprocessableEntity as err:
            if p.runner_container_terminated(pod):
                return pod, None
            now = objects.format_time(self.options.clock())
            pod = await annotate_once(
                self.kube, pod, c.ANNOTATION_UNREGISTRATION_FAILURE_MESSAGE, err.message[:1000]
            )
            if (p.runner_env(pod) or {}).get(c.ENV_RUNNER_EPHEMERAL) == "true":
                pod = await annotate_once(
                    self.kube, pod, c.ANNOTATION_RUNNER_COMPLETION_WAIT_START_TIMESTAMP, now
                )
                # Busy ephemeral runner: it exits by itself after the job; pod events wake us.
                return pod, Result()
            return pod, self._retry()
        log.info("pod %s: removed runner %d from GitHub", name, runner_id)
        return pod, None
