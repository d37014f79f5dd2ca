"""Tells the owner of the work that held the controller's event loop, with an event.

:mod:`gharc.kube.looplag` names a hold by the task that ran it; a tenant reads events on
their own objects, not the controller's log. So a hold named ``reconcile:<controller>:
<ns>/<name>`` becomes a Warning ``EventLoopHeld`` on that object, and one named
``listener:<ns>/<name>`` (an AutoscalingListener, in the controller's namespace) on the
AutoscalingRunnerSet it listens for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
)
from gharc.kube import errors as kerrors
from gharc.kube.events import WARNING
from gharc.kube.looplag import Stall
from gharc.kube.resources import Resource

__all__ = ["REASON", "StallReporter"]

log = logging.getLogger(__name__)

REASON = "EventLoopHeld"

_BY_CONTROLLER: dict[str, Resource] = {
    "autoscalingrunnerset": AUTOSCALING_RUNNER_SETS,
    "ephemeralrunnerset": EPHEMERAL_RUNNER_SETS,
    "ephemeralrunner": EPHEMERAL_RUNNERS,
    "autoscalinglistener": AUTOSCALING_LISTENERS,
}


class StallReporter:
    """``on_stall`` for :class:`~gharc.kube.looplag.LoopLagMonitor`: one event per hold."""

    def __init__(self, reader: Any, recorder: Any) -> None:
        self.reader = reader
        self.recorder = recorder
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, stall: Stall) -> None:
        target = _target(stall.work)
        if target is None:
            return
        task = asyncio.get_running_loop().create_task(self._record(stall, *target))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record(self, stall: Stall, resource: Resource, namespace: str, name: str) -> None:
        try:
            obj = await self.reader.get(resource, name, namespace=namespace)
            if resource is AUTOSCALING_LISTENERS:
                spec = obj.get("spec") or {}
                obj = await self.reader.get(
                    AUTOSCALING_RUNNER_SETS,
                    spec.get("autoscalingRunnerSetName", ""),
                    namespace=spec.get("autoscalingRunnerSetNamespace", ""),
                )
        except (kerrors.ApiError, OSError, TimeoutError) as err:
            log.info("no event for the held loop: %s %s/%s: %r", resource, namespace, name, err)
            return
        self.recorder.record(
            obj,
            WARNING,
            REASON,
            f"work for this object held the controller's event loop for {stall.seconds:.1f} s "
            f"({stall.work}); every scale set waited meanwhile",
        )


def _target(work: str) -> tuple[Resource, str, str] | None:
    kind, _, rest = work.partition(":")
    if kind == "reconcile":
        controller, _, key = rest.partition(":")
        resource = _BY_CONTROLLER.get(controller)
    elif kind == "listener":
        key, resource = rest, AUTOSCALING_LISTENERS
    else:
        return None
    namespace, _, name = key.partition("/")
    if resource is None or not name:
        return None
    return resource, namespace, name
