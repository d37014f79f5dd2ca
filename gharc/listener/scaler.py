"""Desired runner count and patch IDs: the pure half of the listener's scaler.

The EphemeralRunnerSet controller acts on a listener patch only when ``spec.patchID`` differs
from the patch ID its runners were created for, or is 0 (scaleset-controllers.md §9.3,
behaviours.md B3). So the ID is a message to the controller, and the rules below (ARC's
``cmd/ghalistener/scaler``) must hold exactly:

* ``target = min(min_runners + totalAssignedJobs, max_runners)``;
* a sequence starts at -1 and goes up by one on every publish; after ``2**31 - 1`` it wraps
  to 0 and is incremented again (so the next ID is 1: 0 stays reserved for "idle");
* the published ID is the sequence, except 0 when nothing happened since the previous
  publish (no JobCompleted), the target did not change and equals ``min_runners``: the idle
  steady state, in which the controller may trim idle runners.

ARC counts a JobStarted as something happening too; gharc does not (the handler says why):
a started job changes no count and finishes no runner, and a set at ``min_runners`` with a
job running is not idle by its counts anyway (the job is assigned).

gharc adds one rule ARC lacks: a patch identical to the previous one (same replicas, same
ID, which only the idle ``0`` can produce) is not sent, so an idle listener does not write
the API server every long poll. A non-idle evaluation of a poll cycle always gets a fresh
ID, which is what makes the controller re-check a shortfall every cycle. After a message,
publishing only what changed, nothing is published when the target equals the last one
published and no job completed (``changed_only``): such a message (a JobAvailable, a
JobAssigned or JobStarted with counts that did not move) tells the controller nothing, and
one job would otherwise cost two writes of the EphemeralRunnerSet and two reconciles.

Planning and committing are separate so a failed Kubernetes patch changes nothing: the same
plan (and the dirty flag) is retried on the next cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_PATCH_SEQ", "Patch", "Scaler", "desired_count"]

MAX_PATCH_SEQ = 2**31 - 1


def desired_count(min_runners: int, max_runners: int, assigned_jobs: int) -> int:
    """``min(min_runners + assigned, max_runners)``; a negative statistic counts as 0."""
    return min(min_runners + max(0, assigned_jobs), max_runners)


@dataclass(frozen=True)
class Patch:
    """One EphemeralRunnerSet merge patch, and the sequence value it would commit."""

    replicas: int
    patch_id: int
    seq: int


class Scaler:
    """Turns statistics and job events into patches; holds no I/O."""

    def __init__(self, min_runners: int, max_runners: int) -> None:
        if max_runners < min_runners:
            raise ValueError("max_runners must be >= min_runners")
        self.min_runners = min_runners
        self.max_runners = max_runners
        self.seq = -1
        self.last_target = -1
        self.dirty = False
        self.last_published: Patch | None = None
        self.published_count = 0

    def continue_from(self, patch_id: int | None) -> None:
        """Start the sequence after ``patch_id`` (a predecessor's last), before any publish."""
        if patch_id is not None and 0 < patch_id < MAX_PATCH_SEQ and self.published_count == 0:
            self.seq = patch_id

    def mark_dirty(self) -> None:
        """A JobCompleted arrived (or a count must be re-sent): the next patch must carry a
        fresh ID."""
        self.dirty = True

    def target_for(self, assigned_jobs: int, min_runners: int | None = None, extra: int = 0) -> int:
        """The desired count; ``min_runners`` (a scheduled minimum) and ``extra`` (the burst
        buffer) are gharc's additions to ARC's formula, still capped at ``max_runners``."""
        floor = self.min_runners if min_runners is None else min_runners
        return desired_count(floor + max(0, extra), self.max_runners, assigned_jobs)

    def plan(
        self,
        assigned_jobs: int,
        *,
        min_runners: int | None = None,
        extra: int = 0,
        changed_only: bool = False,
    ) -> Patch | None:
        """The patch to publish now, or None when it would repeat the previous one (or, with
        ``changed_only``, when neither the target nor the dirty flag changed since it)."""
        floor = self.min_runners if min_runners is None else min_runners
        target = self.target_for(assigned_jobs, floor, extra)
        if changed_only and not self.dirty and target == self.last_target:
            return None
        seq = 1 if self.seq >= MAX_PATCH_SEQ else self.seq + 1
        idle = (
            not self.dirty and target == self.last_target and target == min(floor, self.max_runners)
        )
        patch = Patch(replicas=target, patch_id=0 if idle else seq, seq=seq)
        last = self.last_published
        if last is not None and (last.replicas, last.patch_id) == (patch.replicas, patch.patch_id):
            return None
        return patch

    def commit(self, patch: Patch) -> None:
        """Record that ``patch`` reached the API server."""
        self.seq = patch.seq
        self.last_target = patch.replicas
        self.dirty = False
        self.last_published = patch
        self.published_count += 1

    @property
    def target(self) -> int:
        """The replicas last published (-1 before the first publish)."""
        return self.last_target
