"""Reading runner pods: stopped or not, Ready since when, scope from the runner env.

Shared by the runner-pod controller (graceful stop) and the replica sync, which must agree
exactly on what "stopped" means: the sync deletes an owner whose pods are all stopped
without any RemoveRunner call, which is only safe because graceful stop also treats a
stopped pod as already unregistered (legacy.md 4.5 rule 6, B5).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gharc.api.legacy import constants as c
from gharc.kube import errors as kerrors
from gharc.kube import objects

if TYPE_CHECKING:
    from gharc.kube.resources import Resource

JSON = dict[str, Any]


def _uid(pod: Mapping[str, Any]) -> str:
    return str(objects.meta(pod).get("uid") or "")


def _runner_status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cs in objects.status_of(pod).get("containerStatuses") or ():
        if cs.get("name") == c.CONTAINER_RUNNER:
            return dict(cs)
    return {}


def runner_container_terminated(pod: Mapping[str, Any]) -> bool:
    return bool((_runner_status(pod).get("state") or {}).get("terminated"))


def runner_container_terminated_before(pod: Mapping[str, Any]) -> bool:
    """The runner container exited once and was restarted (``lastState.terminated``)."""
    return bool((_runner_status(pod).get("lastState") or {}).get("terminated"))


def _deletion_requested(pod: Mapping[str, Any], deadline: dt.datetime) -> dt.datetime:
    """When the pod's deletion was asked for: its deletionTimestamp is the deadline."""
    grace = objects.meta(pod).get("deletionGracePeriodSeconds") or 0
    return deadline - dt.timedelta(seconds=int(grace))


def _runner_finished(pod: Mapping[str, Any]) -> dt.datetime | None:
    terminated = (_runner_status(pod).get("state") or {}).get("terminated") or {}
    return objects.parse_time(terminated.get("finishedAt"))


def stopped_by_deletion(pod: Mapping[str, Any]) -> bool:
    """The pod is being deleted and its runner container did not exit before that.

    Rule 6 trusts a stopped runner to have de-registered itself, which holds for a runner
    that exited after its job. A deletion races it: the kubelet stops the containers while
    our finalizer still holds the pod, and a runner stopped idle (SIGTERM) only goes
    offline, keeping its registration. A pod deleted from under its runner (the garbage
    collector after a RunnerSet's deletion, a user's ``kubectl delete``) must still be
    unregistered, whichever of the kubelet and graceful stop gets there first.
    """
    deadline = objects.deleting_since(pod)
    if deadline is None or not _runner_status(pod):
        return False  # not being deleted, or the runner never started: nothing registered
    requested = _deletion_requested(pod, deadline)
    finished = _runner_finished(pod)
    # Timestamps have 1 s resolution: the same second counts as stopped by the deletion
    # (at worst one RemoveRunner answered 404).
    return finished is None or finished >= requested.replace(microsecond=0)


def restarts_runner(pod: Mapping[str, Any]) -> bool:
    """The kubelet starts the runner container again after it exits (a RunnerSet's pod:
    restartPolicy Always), and the new runner registers again under the pod's name."""
    return (objects.spec_of(pod).get("restartPolicy") or "Always") != "Never"


def stopped_for_good(pod: Mapping[str, Any], now: dt.datetime, margin: dt.timedelta) -> bool:
    """A pod being deleted whose runner container the kubelet will not start again.

    The kubelet moves a pod it has stopped for its deletion to a terminal phase, and does
    not restart a container it stopped after the deletion began. Past the deletion's
    deadline (plus ``margin``) no kubelet is answering (a lost node), so nothing starts.
    """
    deadline = objects.deleting_since(pod)
    if deadline is None:
        return False
    if objects.status_of(pod).get("phase") in ("Succeeded", "Failed") or now > deadline + margin:
        return True
    finished = _runner_finished(pod)
    # A strict bound: an exit in the same second as the request may predate it.
    return finished is not None and finished > _deletion_requested(pod, deadline)


def is_stopped(pod: Mapping[str, Any]) -> bool:
    """ARC's ``runnerPodOrContainerIsStopped``."""
    status = objects.status_of(pod)
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        return True
    if phase == "Running" and runner_container_terminated(pod):
        return True
    return objects.is_deleting(pod) and not status.get("containerStatuses")


def phase(pod: Mapping[str, Any]) -> str:
    return str(objects.status_of(pod).get("phase") or "")


def ready_since(pod: Mapping[str, Any]) -> dt.datetime | None:
    """When the Ready condition last became True; None when it is not True."""
    for cond in objects.status_of(pod).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return objects.parse_time(cond.get("lastTransitionTime")) or dt.datetime.min.replace(
                tzinfo=dt.UTC
            )
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    return ready_since(pod) is not None


def registration_timed_out(pod: Mapping[str, Any], now: dt.datetime, timeout: dt.timedelta) -> bool:
    """Ready for longer than ``timeout`` (a pod that never became Ready has not timed out)."""
    since = ready_since(pod)
    return since is not None and now - since > timeout


def runner_env(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """Literal env values of the ``runner`` container; None when it has no env at all."""
    for container in objects.spec_of(pod).get("containers") or ():
        if container.get("name") == c.CONTAINER_RUNNER:
            env = container.get("env") or []
            if not env:
                return None
            return {str(e.get("name")): str(e.get("value") or "") for e in env}
    return None


class RunnerPods:
    """Runner pods from the shared informer that watches only pods labelled
    ``actions-runner`` (every pod a Runner or RunnerSet creates), so the controllers never
    cache the cluster's other pods."""

    SELECTOR = c.LABEL_RUNNER

    def __init__(self, cache: Any) -> None:
        from gharc.kube.informer import EventHandlerFuncs
        from gharc.kube.resources import PODS

        self.informer = cache.informer(PODS, label_selector=self.SELECTOR)
        self._exited_live: set[str] = set()
        self.informer.add_event_handler(
            EventHandlerFuncs(
                add=self._observe,
                update=lambda _old, new: self._observe(new),
                delete=lambda pod: self._exited_live.discard(_uid(pod)),
            )
        )

    def _observe(self, pod: Mapping[str, Any]) -> None:
        if objects.is_deleting(pod):
            return
        if is_stopped(pod):
            self._exited_live.add(_uid(pod))
        else:
            # Running again: a StatefulSet's pod restarts its exited runner container, and
            # that runner registers again under the pod's name (RunnerSet, restartPolicy
            # Always); its exit no longer says anything about the registration.
            self._exited_live.discard(_uid(pod))

    def exited_before_deletion(self, pod: Mapping[str, Any]) -> bool:
        """The informer saw this pod's runner stopped while the pod was not being deleted.

        The watch delivers every version in order, so this tells a runner that exited by
        itself (rule 6 holds: it de-registered) from one the kubelet stopped for a deletion,
        where timestamps of one-second resolution often cannot: a finished runner's owner is
        deleted within the same second as its exit. Unknown after a restart or a relist; then
        :func:`stopped_by_deletion` decides from the timestamps.
        """
        return _uid(pod) in self._exited_live

    async def _synced(self) -> None:
        if not self.informer.has_synced:
            await self.informer.wait_for_sync()

    async def get(self, namespace: str, name: str) -> JSON | None:
        await self._synced()
        obj = self.informer.store.get(namespace, name)
        return obj if obj is None else dict(obj)

    async def get_object(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> JSON:
        """:meth:`get` in the shape of a reader's ``get``, for
        :func:`~gharc.kube.objectreconciler.reconcile_fetched`: NotFound when the pod is gone."""
        pod = await self.get(namespace or "", name)
        if pod is None:
            raise kerrors.NotFound(f'{resource} "{name}" not found in cache', reason="NotFound")
        return pod

    async def list(self, namespace: str) -> list[JSON]:
        await self._synced()
        return list(self.informer.store.list(namespace))
