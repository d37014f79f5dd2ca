"""Read-only views over scale-set objects as the API returns them: each rule in one place.

The controllers work on plain dicts (informer caches, merge patches), and a field read
from a dict needs its default and its parse: ``spec.replicas`` unset is 0, a runner's
revision annotation that is missing or not a number is 0, a scale set id annotation of
``"abc"`` or ``"0"`` means "not created yet". Written inline, each rule was copied to
every reader and the copies drifted (one parse of the scale set id accepted 0, the other
did not). A view names the rule once.

Views are cheap on purpose: they are built in every reconcile over the cache's dicts, so
they hold the dict (no copy), validate nothing up front, and read a field only when it is
asked for. A value the controller cannot read is its default, never an exception: a bad
annotation written by someone else must not stop a reconcile. For validating what a user
wrote, see :mod:`gharc.api.scaleset.models`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gharc.api.scaleset import constants as c
from gharc.api.scaleset import scaling_wire as wire
from gharc.kube import objects

__all__ = [
    "ANNOTATION_ACTIONABLE_REVISION",
    "AutoscalingListenerView",
    "AutoscalingRunnerSetView",
    "EphemeralRunnerSetView",
    "EphemeralRunnerView",
]

#: The ``spec.actionableRevision`` of the EphemeralRunnerSet a runner was built from
#: (behaviours B4). gharc-only: ARC has no such key.
ANNOTATION_ACTIONABLE_REVISION: Final = "actions.github.com/actionable-revision"

_EMPTY: Mapping[str, Any] = {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


@dataclass(frozen=True, slots=True)
class _View:
    """The object's dict and its identity; subclasses add the fields of one kind."""

    obj: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(objects.meta(self.obj).get("name") or "")

    @property
    def namespace(self) -> str:
        return str(objects.meta(self.obj).get("namespace") or "")

    @property
    def uid(self) -> str:
        """``metadata.uid``; "" for an object not yet stored (a desired object)."""
        return str(objects.meta(self.obj).get("uid") or "")

    @property
    def annotations(self) -> Mapping[str, Any]:
        """``metadata.annotations`` (not a copy: read only)."""
        return _mapping(objects.meta(self.obj).get("annotations"))

    @property
    def spec(self) -> Mapping[str, Any]:
        return objects.spec_of(self.obj)

    @property
    def status(self) -> Mapping[str, Any]:
        return objects.status_of(self.obj)


@dataclass(frozen=True, slots=True)
class EphemeralRunnerView(_View):
    """An EphemeralRunner: its phase, job, registration and the set revision it was built for."""

    @property
    def phase(self) -> str:
        """``status.phase``; "" before the controller first reported one."""
        return str(self.status.get("phase") or "")

    @property
    def is_running(self) -> bool:
        return self.phase == c.PHASE_RUNNING

    @property
    def is_done(self) -> bool:
        """ARC ``IsDone()``: Succeeded, Failed or Outdated; the runner will not run a job again."""
        return self.phase in c.EPHEMERAL_RUNNER_DONE_PHASES

    @property
    def ready(self) -> bool:
        return bool(self.status.get("ready"))

    @property
    def job_id(self) -> str:
        """``status.jobId``; "" while the runner has no job."""
        return str(self.status.get("jobId") or "")

    @property
    def has_job(self) -> bool:
        """ARC ``HasJob()``: the listener recorded a job for this runner (it is busy)."""
        return bool(self.job_id)

    @property
    def reason(self) -> str:
        """``status.reason``: why the runner failed (e.g. an invalid pod template)."""
        return str(self.status.get("reason") or "")

    @property
    def failures(self) -> Mapping[str, Any]:
        """``status.failures``: pod uid (or loss key) -> when it failed (behaviours B2)."""
        return _mapping(self.status.get("failures"))

    @property
    def runner_id(self) -> int:
        """The registration's id (``status.runnerId``); 0 before the runner registered."""
        return objects.int_or(self.status.get("runnerId"))

    @property
    def scale_set_id(self) -> int:
        """``spec.runnerScaleSetId``; 0 when unset."""
        return objects.int_or(self.spec.get("runnerScaleSetId"))

    @property
    def revision(self) -> int:
        """The actionable revision the runner was built for; 0 for runners without the
        annotation (built by ARC or by an older gharc)."""
        return objects.int_or(self.annotations.get(ANNOTATION_ACTIONABLE_REVISION))


@dataclass(frozen=True, slots=True)
class EphemeralRunnerSetView(_View):
    """An EphemeralRunnerSet: the listener's replicas and patch, the revisions, the marker."""

    @property
    def replicas(self) -> int:
        """``spec.replicas``; unset is 0 (the listener sets it)."""
        return objects.int_or(self.spec.get("replicas"))

    @property
    def patch_id(self) -> int:
        """``spec.patchID``; unset is 0, which means "no patch" (scale-down allowed)."""
        return objects.int_or(self.spec.get(wire.PATCH_ID_FIELD))

    @property
    def actionable_revision(self) -> int:
        """``spec.actionableRevision``: bumped by the ARS on each runner template change."""
        return objects.int_or(self.spec.get("actionableRevision"))

    @property
    def applied_revision(self) -> int:
        """``status.appliedActionableRevision``: the revision the set's runners were brought to."""
        return objects.int_or(self.status.get("appliedActionableRevision"))

    @property
    def revision_pending(self) -> bool:
        """A template change not yet applied to the runners (behaviours B4)."""
        return self.actionable_revision > self.applied_revision

    @property
    def cleanup_marker(self) -> int | None:
        """``status.finishedRunnerCleanupPatchID``: the patch whose finished runners were
        cleaned up (behaviours B3); None when there is none."""
        return objects.int_or_none(self.status.get(wire.CLEANUP_MARKER_FIELD))

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "")

    @property
    def runner_spec(self) -> Mapping[str, Any]:
        """``spec.ephemeralRunnerSpec``, the runners' template (not a copy: read only)."""
        return _mapping(self.spec.get("ephemeralRunnerSpec"))

    @property
    def scale_set_id(self) -> int:
        """The runners' ``runnerScaleSetId``; 0 when unset."""
        return objects.int_or(self.runner_spec.get("runnerScaleSetId"))

    @property
    def github_config_url(self) -> str:
        return str(self.runner_spec.get("githubConfigUrl") or "")

    @property
    def scale_set_name(self) -> str:
        """The ARS name, from the set's label; the set's own name for a set without it."""
        return str(
            _mapping(objects.meta(self.obj).get("labels")).get(c.LABEL_SCALE_SET_NAME, self.name)
        )

    @property
    def scale_set_namespace(self) -> str:
        """The ARS namespace, from the set's label; the set's own namespace without it."""
        labels = _mapping(objects.meta(self.obj).get("labels"))
        return str(labels.get(c.LABEL_SCALE_SET_NAMESPACE, self.namespace))


@dataclass(frozen=True, slots=True)
class AutoscalingRunnerSetView(_View):
    """An AutoscalingRunnerSet as the controllers read it in hot paths (no validation; the
    ARS reconciler validates with :class:`gharc.api.scaleset.models.AutoscalingRunnerSetSpec`)."""

    @property
    def scale_set_id(self) -> int | None:
        """The ``runner-scale-set-id`` annotation as a positive int; None when the scale set
        is not created yet (missing, not a number, or not positive)."""
        value = objects.int_or_none(self.annotations.get(c.ANNOTATION_RUNNER_SCALE_SET_ID))
        return value if value is not None and value > 0 else None

    @property
    def scale_set_name(self) -> str:
        """``spec.runnerScaleSetName``, defaulting to the ARS name (not written back)."""
        return str(self.spec.get("runnerScaleSetName") or self.name)

    @property
    def runner_group(self) -> str:
        """``spec.runnerGroup``; "" is the default group."""
        return str(self.spec.get("runnerGroup") or "")

    @property
    def github_config_url(self) -> str:
        return str(self.spec.get("githubConfigUrl") or "")

    @property
    def min_runners(self) -> int:
        """``spec.minRunners``; unset is 0."""
        return objects.int_or(self.spec.get("minRunners"))


@dataclass(frozen=True, slots=True)
class AutoscalingListenerView(_View):
    """An AutoscalingListener: which scale set and runner set it serves, and its bounds."""

    @property
    def scale_set_id(self) -> int:
        """``spec.runnerScaleSetId``; 0 when unset."""
        return objects.int_or(self.spec.get("runnerScaleSetId"))

    @property
    def min_runners(self) -> int:
        """``spec.minRunners``; unset is 0."""
        return objects.int_or(self.spec.get("minRunners"))

    @property
    def max_runners(self) -> int:
        """``spec.maxRunners``; unset is unlimited."""
        return c.max_runners_or_unlimited(self.spec.get("maxRunners"))

    @property
    def ars_namespace(self) -> str:
        """``spec.autoscalingRunnerSetNamespace``: where the ARS, its runners and the
        listener's Role live."""
        return str(self.spec.get("autoscalingRunnerSetNamespace") or "")

    @property
    def ars_name(self) -> str:
        return str(self.spec.get("autoscalingRunnerSetName") or "")

    @property
    def ers_name(self) -> str:
        return str(self.spec.get("ephemeralRunnerSetName") or "")

    @property
    def github_config_url(self) -> str:
        return str(self.spec.get("githubConfigUrl") or "")

    @property
    def failures(self) -> int:
        """``status.failures``: listener pod failures in a row (the restart backoff's step);
        0 when none were counted."""
        return objects.int_or(self.status.get("failures"))
