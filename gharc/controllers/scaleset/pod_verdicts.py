"""B2: what a runner pod's status means for its runner, read in one place.

A runner whose pod failed (evicted, OOM-killed, lost with its node, an init container that
failed) must never be counted as capacity: the EphemeralRunner reconciler acts on these
verdicts (replace the pod, or give the runner a fresh registration when its single-use JIT
config may have been redeemed), and nothing else reads a runner pod's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.api.scaleset import constants as c
from gharc.api.scaleset.views import EphemeralRunnerView
from gharc.kube import objects

#: Pod ``status.reason`` values that mean the pod is gone for good, whatever its phase.
_DEAD_POD_REASONS = frozenset({"Evicted", "NodeLost", "UnexpectedAdmissionError", "Shutdown"})


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """What a runner pod's status means for the runner."""

    kind: str  # "running" | "success" | "outdated" | "failed" | "wait"
    reason: str = ""
    message: str = ""


def _runner_status(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cs in objects.status_of(pod).get("containerStatuses") or ():
        if cs.get("name") == c.RUNNER_CONTAINER_NAME:
            return dict(cs)
    return None


def _terminated(cs: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if cs is None:
        return None
    return (cs.get("state") or {}).get("terminated")


def _failed_init_container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cs in objects.status_of(pod).get("initContainerStatuses") or ():
        term = _terminated(cs)
        if term is not None and int(term.get("exitCode") or 0) != 0:
            return dict(cs)
    return None


def judge_pod(pod: Mapping[str, Any]) -> PodVerdict:
    """Classify a runner pod (spec §10.1 step 10, behaviours B2)."""
    status = objects.status_of(pod)
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    cs = _runner_status(pod)
    term = _terminated(cs)
    if term is not None:
        code = int(term.get("exitCode") or 0)
        if code == 0:
            return PodVerdict("success")
        if code == c.RUNNER_EXIT_CODE_VERSION_DEPRECATED:
            return PodVerdict("outdated")
        why = str(term.get("reason") or "Error")
        return PodVerdict("failed", why, f"runner container exited with code {code} ({why})")
    if phase == "Succeeded":
        return PodVerdict("success")
    if phase == "Failed" or reason in _DEAD_POD_REASONS or reason.startswith("OutOf"):
        return PodVerdict("failed", reason or "PodFailed", message or f"pod phase {phase}")
    init = _failed_init_container(pod)
    if init is not None:
        code = int((_terminated(init) or {}).get("exitCode") or 0)
        return PodVerdict(
            "failed",
            "InitContainerFailed",
            f"init container {init.get('name')} exited with code {code}",
        )
    if cs is None:
        return PodVerdict("wait")
    return PodVerdict("running", reason, message)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Status of the newest PodReady condition (ARC takes the latest lastTransitionTime)."""
    conditions = [
        cond
        for cond in objects.status_of(pod).get("conditions") or ()
        if cond.get("type") == "Ready"
    ]
    if not conditions:
        return False
    newest = max(conditions, key=lambda cond: str(cond.get("lastTransitionTime") or ""))
    return str(newest.get("status")) == "True"


def pod_was_running(er: Mapping[str, Any]) -> bool:
    """The runner's last pod was seen running: its runner may have redeemed the JIT config.

    A JIT config is single-use: a second process with it is refused with Conflict and
    sits idle, never given a job (ARC #4588: 64 minutes). Every path that loses a pod
    that ran moves the phase back to Pending together with spending the config, so a
    pod-less runner still Running lost its pod without the controller seeing it fail."""
    runner = EphemeralRunnerView(er)
    return runner.is_running or runner.ready


def runner_started(er: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The failed pod's runner container ran (or the runner was seen Running), so it may
    have redeemed the JIT config. A pod that failed before (image pull, init container,
    admission) leaves the config unused, and the next pod may keep it: no registration is
    spent on a pod that never started a runner."""
    if pod_was_running(er):
        return True
    cs = _runner_status(pod)
    if cs is None:
        return False
    state = cs.get("state") or {}
    return "running" in state or bool((state.get("terminated") or {}).get("startedAt"))
