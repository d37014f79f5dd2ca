"""Read-only views over legacy (summerwind) objects: each field's default in one place.

Like :mod:`gharc.api.scaleset.views`: the controllers read plain dicts from the cache, and
a field read inline takes its default at every reader. ARC's defaults here are ones a
reader can get wrong without noticing: ``replicas`` unset is 1 (not 0), a runner is
ephemeral and has a docker sidecar unless it says otherwise, an HRA's ``maxReplicas``
unset means no upper bound. The views hold the dict (no
copy) and read a field only when asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gharc.api.legacy import constants as c
from gharc.kube import objects

__all__ = ["HorizontalRunnerAutoscalerView", "ReplicatedView", "RunnerConfigView", "RunnerScope"]


def _flag(value: Any, default: bool) -> bool:
    return default if value is None else bool(value)


class RunnerScope(TypedDict):
    """Where a runner registers and what it is called for: the fields the HRA controller
    and the webhook server both match jobs against (keyword arguments of their targets)."""

    enterprise: str
    organization: str
    repository: str
    group: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunnerConfigView:
    """ARC's ``RunnerConfig``: the runner fields of a Runner's or a RunnerSet's ``spec``, or
    of a RunnerDeployment's or RunnerReplicaSet's ``spec.template.spec``."""

    config: Mapping[str, Any]

    @property
    def scope(self) -> RunnerScope:
        """``enterprise``, ``organization``, ``repository``, ``group`` (unset: ``""``) and
        ``labels`` (unset: none), as text."""
        get = self.config.get
        return RunnerScope(
            enterprise=str(get("enterprise") or ""),
            organization=str(get("organization") or ""),
            repository=str(get("repository") or ""),
            group=str(get("group") or ""),
            labels=tuple(str(x) for x in get("labels") or ()),
        )

    @property
    def ephemeral(self) -> bool:
        """``ephemeral``; unset is true (one job per runner)."""
        return _flag(self.config.get("ephemeral"), True)

    @property
    def kubernetes_mode(self) -> bool:
        """``containerMode: kubernetes``: job containers run as pods, no docker at all."""
        return self.config.get("containerMode") == c.CONTAINER_MODE_KUBERNETES

    @property
    def docker_enabled(self) -> bool:
        """``dockerEnabled`` (unset: true), and never in kubernetes mode."""
        return _flag(self.config.get("dockerEnabled"), True) and not self.kubernetes_mode

    @property
    def dockerd_within_runner_container(self) -> bool:
        """``dockerdWithinRunnerContainer`` (unset: false), and never in kubernetes mode."""
        within = _flag(self.config.get("dockerdWithinRunnerContainer"), False)
        return within and not self.kubernetes_mode


@dataclass(frozen=True, slots=True)
class ReplicatedView:
    """A RunnerDeployment, RunnerReplicaSet, RunnerSet or StatefulSet: what it wants and what
    its status counts."""

    obj: Mapping[str, Any]

    @property
    def replicas(self) -> int:
        """``spec.replicas``; unset (or not a number) is 1, as for Kubernetes' workloads."""
        return objects.int_or(objects.spec_of(self.obj).get("replicas"), 1)

    def count(self, key: str) -> int:
        """A ``status`` count; unset (nothing reported yet) is 0."""
        return objects.int_or(objects.status_of(self.obj).get(key))


@dataclass(frozen=True, slots=True)
class HorizontalRunnerAutoscalerView:
    """A HorizontalRunnerAutoscaler's bounds and its last decision. The HRA controller, its
    metrics and the webhook server's reservations all read these."""

    obj: Mapping[str, Any]

    @property
    def min_replicas(self) -> int | None:
        """``spec.minReplicas``; None when unset (the controller reports the HRA invalid)."""
        return objects.int_or_none(objects.spec_of(self.obj).get("minReplicas"))

    @property
    def max_replicas(self) -> int | None:
        """``spec.maxReplicas``; None when unset: no upper bound."""
        return objects.int_or_none(objects.spec_of(self.obj).get("maxReplicas"))

    @property
    def desired_replicas(self) -> int | None:
        """``status.desiredReplicas``: the last decision; None before the first one."""
        return objects.int_or_none(objects.status_of(self.obj).get("desiredReplicas"))
