"""Which HRA a ``workflow_job`` event scales (legacy.md 5.3, ARC ``getScaleUpTargetWithFunction``).

Each HRA gets keys from its target's scope (``owner/repo``, ``org``, ``org/group/G``,
``enterprises/E``, ``enterprises/E/group/G``). An event is looked up by its repository key
first; for organization repositories, then by the runner groups the HRAs manage that are
visible to the repository (asked from GitHub when the server has a client), Default groups
before Custom ones and organization before enterprise. Within a key the first HRA with a
single ``workflowJob`` trigger whose target carries every job label (but ``self-hosted``,
case-insensitively) wins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gharc.api.legacy import constants as lc
from gharc.api.legacy.duration import parse_go_duration
from gharc.api.legacy.views import RunnerConfigView
from gharc.api.resources import HORIZONTAL_RUNNER_AUTOSCALERS, RUNNER_DEPLOYMENTS, RUNNER_SETS
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import Reader

DEFAULT_DURATION = dt.timedelta(minutes=10)
SELF_HOSTED = "self-hosted"

JSON = dict[str, Any]


class TargetLookupError(Exception):
    """The lookup itself failed (a target could not be read); answered with 500."""


@dataclass(frozen=True)
class TargetSpec:
    """The scope and labels of an HRA's RunnerDeployment or RunnerSet."""

    kind: str
    enterprise: str
    organization: str
    repository: str
    group: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Match:
    """The HRA to scale and how long its reservation lasts."""

    namespace: str
    name: str
    duration: dt.timedelta


@dataclass(frozen=True, order=True)
class RunnerGroup:
    """A runner group: ``kind`` 0 Default / 1 Custom, ``scope`` 0 organization / 1 enterprise
    (numbers so that sorting gives ARC's traversal order)."""

    kind: int
    scope: int
    name: str = ""


DEFAULT, CUSTOM = 0, 1
ORGANIZATION, ENTERPRISE = 0, 1

#: (owner login, repository name) -> the runner groups GitHub says the repository can use.
VisibleGroups = Callable[[str, str], Awaitable[Sequence[RunnerGroup]]]


def trigger_duration(hra: Mapping[str, Any]) -> dt.timedelta | None:
    """The reservation length of a workflow_job HRA; None if it is not one (exactly one
    trigger, with ``githubEvent.workflowJob`` set). A missing or <= 0 duration is 10 min."""
    triggers = objects.spec_of(hra).get("scaleUpTriggers") or []
    if len(triggers) != 1:
        return None
    event = triggers[0].get("githubEvent")
    if not isinstance(event, Mapping) or event.get("workflowJob") is None:
        return None
    raw = triggers[0].get("duration")
    try:
        d = parse_go_duration(str(raw)) if raw else dt.timedelta()
    except ValueError:
        d = dt.timedelta()
    return d if d > dt.timedelta() else DEFAULT_DURATION


def hra_keys(spec: TargetSpec) -> list[str]:
    """The lookup keys of an HRA whose target is ``spec`` (legacy.md 5.3 table)."""
    is_set = spec.kind == lc.KIND_RUNNER_SET
    if spec.repository:
        return [spec.repository]
    if spec.organization:
        if not spec.group:
            return [spec.organization]
        group_key = f"{spec.organization}/group/{spec.group}"
        return [spec.organization, group_key] if is_set else [group_key]
    if spec.enterprise:
        base = f"enterprises/{spec.enterprise}"
        if not spec.group:
            return [base]
        group_key = f"{base}/group/{spec.group}"
        return [base, group_key] if is_set else [group_key]
    return []


def labels_match(job_labels: Sequence[str], target_labels: Sequence[str]) -> bool:
    """Webhook label rule: each job label but ``self-hosted`` equals a target label,
    ignoring case (Go ``strings.EqualFold``)."""
    have = {label.casefold() for label in target_labels}
    return all(label == SELF_HOSTED or label.casefold() in have for label in job_labels)


def target_spec(kind: str, obj: Mapping[str, Any]) -> TargetSpec:
    spec = objects.spec_of(obj)
    runner = spec if kind == lc.KIND_RUNNER_SET else (spec.get("template") or {}).get("spec") or {}
    return TargetSpec(kind=kind, **RunnerConfigView(runner).scope)


def group_key(group: RunnerGroup, owner: str, enterprise: str) -> str:
    if group.kind == DEFAULT:
        return owner if group.scope == ORGANIZATION else f"enterprises/{enterprise}"
    if group.scope == ORGANIZATION:
        return f"{owner}/group/{group.name}"
    return f"enterprises/{enterprise}/group/{group.name}"


class TargetLookup:
    """Finds the HRA for an event by reading HRAs and their targets from ``reader``."""

    def __init__(
        self,
        reader: Reader,
        *,
        namespace: str | None = None,
        visible_groups: VisibleGroups | None = None,
    ) -> None:
        self.reader = reader
        self.namespace = namespace or None
        self.visible_groups = visible_groups

    async def _target(self, hra: Mapping[str, Any]) -> TargetSpec | None:
        ref = objects.spec_of(hra).get("scaleTargetRef") or {}
        kind = str(ref.get("kind") or lc.KIND_RUNNER_DEPLOYMENT)
        name = ref.get("name")
        if not name:
            return None
        resource = RUNNER_SETS if kind == lc.KIND_RUNNER_SET else RUNNER_DEPLOYMENTS
        obj = await self.reader.get(
            resource, str(name), namespace=str(hra["metadata"]["namespace"])
        )
        return target_spec(resource.kind, obj)

    async def _hras(self) -> list[JSON]:
        hras = await self.reader.list(HORIZONTAL_RUNNER_AUTOSCALERS, namespace=self.namespace)
        return sorted(hras, key=lambda h: (h["metadata"]["namespace"], h["metadata"]["name"]))

    async def workflow_job_targets(self) -> list[tuple[JSON, TargetSpec]]:
        """Every live workflow_job HRA with its target's scope (HRAs whose target is
        missing are left out)."""
        out: list[tuple[JSON, TargetSpec]] = []
        for hra in await self._hras():
            if objects.is_deleting(hra):
                continue
            if trigger_duration(hra) is None:
                continue
            try:
                spec = await self._target(hra)
            except kerrors.NotFound:
                continue
            if spec is not None:
                out.append((hra, spec))
        return out

    async def _for_key(self, hras: list[JSON], key: str, labels: Sequence[str]) -> Match | None:
        for hra in hras:
            try:
                spec = await self._target(hra)
            except kerrors.NotFound:
                continue  # an HRA whose target is gone has no keys
            if spec is None or key not in hra_keys(spec):
                continue
            if objects.is_deleting(hra):
                continue
            duration = trigger_duration(hra)
            if duration is None or not labels_match(labels, spec.labels):
                continue
            meta = hra["metadata"]
            return Match(str(meta["namespace"]), str(meta["name"]), duration)
        return None

    async def _managed_groups(
        self, hras: list[JSON], owner: str, enterprise: str
    ) -> set[RunnerGroup]:
        groups: set[RunnerGroup] = set()
        for hra in hras:
            try:
                spec = await self._target(hra)
            except kerrors.NotFound as err:  # ARC: one unreadable target fails the whole lookup
                meta = objects.meta(hra)
                raise TargetLookupError(
                    f"reading the target of HRA {meta.get('namespace')}/{meta.get('name')}: {err}"
                ) from None
            if spec is None:
                continue
            if spec.group and not spec.enterprise and not spec.organization:
                continue
            if spec.enterprise != enterprise and spec.organization != owner:
                continue
            scope = ENTERPRISE if spec.enterprise else ORGANIZATION
            groups.add(RunnerGroup(CUSTOM if spec.group else DEFAULT, scope, spec.group))
        return groups

    async def find(
        self,
        *,
        owner: str,
        repo: str,
        owner_type: str,
        enterprise: str,
        labels: Sequence[str],
    ) -> Match | None:
        hras = await self._hras()
        match = await self._for_key(hras, f"{owner}/{repo}", labels)
        if match is not None or owner_type == "User":
            return match
        managed = await self._managed_groups(hras, owner, enterprise)
        if not managed:
            return None
        visible = managed
        if self.visible_groups is not None:
            seen = set(await self.visible_groups(owner, repo))
            visible = {g for g in managed if _visible(g, seen)}
        for group in sorted(visible):
            match = await self._for_key(hras, group_key(group, owner, enterprise), labels)
            if match is not None:
                return match
        return None


def _visible(group: RunnerGroup, seen: set[RunnerGroup]) -> bool:
    """Default groups match by kind and scope only (GitHub's default group name varies)."""
    if group.kind == DEFAULT:
        return any(g.kind == DEFAULT and g.scope == group.scope for g in seen)
    return group in seen
