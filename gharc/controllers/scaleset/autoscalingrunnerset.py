"""AutoscalingRunnerSet reconciler (spec §7, §12; behaviours B4).

From one user-written ARS to: a runner scale set in GitHub, one EphemeralRunnerSet (same
name, owned by the ARS) and one AutoscalingListener (controller namespace, no owner).

How gharc differs from ARC, on purpose:

- No integrity hashes. ``status.observedGeneration`` is written only at the end of a
  reconcile that applied everything, so a half-applied change is retried and reported as
  ``Pending`` rather than settled.
- A runner template change patches the ERS ``spec.ephemeralRunnerSpec`` in place and
  bumps ``spec.actionableRevision`` (optimistic lock: a stale read cannot bump twice). The
  listener is left alone and nothing waits for runners to drain: ARC deleted the listener
  and waited for ``running + pending == 0``, which never happens with warm idle runners
  (``minRunners > 0``), so the update stalled with jobs queued (ARC #4432). The ERS
  reconciler replaces idle runners; busy ones finish their job.
- Desired and live specs are compared semantically (``env: []`` equals no ``env``).
- An invalid spec (bad URL, missing or ambiguous secret, malformed App key, unknown runner
  group, invalid proxy URL, a scale set name the service refuses) is reported in
  ``status`` and as a Warning event, then the reconciler waits for a change instead of
  retrying hot; secrets are not watched, so those cases retry slowly.
- GitHub or the Kubernetes API failing a call made for the scale set (host unknown,
  token revoked, manager Role missing: 403) sets condition ``ScaleSetReady`` False with
  the reason, ``status.message`` and one Warning event per change of reason, and retries
  with the work queue's backoff; the next success sets it True and clears the message.
- Changing ``runnerGroup`` or ``githubConfigUrl`` renames the listener; the old one is
  deleted instead of orphaned (ARC §17.5).
- The ARS itself is read from the API server (not the cache) at the start of each
  reconcile: reconciles are also triggered by ERS and listener events, and a cached ARS
  one write behind would "revert" a fresh ERS to the old template and bump twice.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from gharc.api import schedule
from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
)
from gharc.api.scaleset import constants as c
from gharc.api.scaleset.models import AutoscalingRunnerSetSpec
from gharc.api.scaleset.scalesetname import scale_set_name_problem
from gharc.api.scaleset.views import (
    AutoscalingListenerView,
    AutoscalingRunnerSetView,
    EphemeralRunnerSetView,
)
from gharc.controllers.scaleset import conditions as cond
from gharc.controllers.scaleset import error_reporting, listenerpolicy
from gharc.controllers.scaleset import listenerresources as lr
from gharc.controllers.scaleset.credentials import (
    ClientResolver,
    ConfigurationError,
    GitHubTarget,
    proxy_problems,
)
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.error_reporting import reconcile_or_wait_for_github
from gharc.controllers.scaleset.events import EventRecorder, emit
from gharc.controllers.scaleset.labels import filter_and_merge_labels, merge_annotations
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.controllers.scaleset.reconcileutil import remove_finalizer
from gharc.controllers.scaleset.secretprotection import SecretProtection
from gharc.github import errors as gherrors
from gharc.github.actions import ActionsClient
from gharc.github.config import InvalidConfigUrl, parse_config_url
from gharc.github.models import Label, RunnerScaleSet, RunnerSetting
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.controller import Controller
from gharc.kube.events import NORMAL, WARNING
from gharc.kube.finalizers import add_finalizer
from gharc.kube.handler import owner_reference
from gharc.kube.manager import ManagerLike
from gharc.kube.objectreconciler import reconcile_fetched, request_of
from gharc.kube.predicate import (
    ChangedBesides,
    InNamespace,
    Predicate,
    ResourceVersionChangedPredicate,
)
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from gharc.kube.store import copy_object

log = logging.getLogger(__name__)

JSON = dict[str, Any]

#: Phase of an ARS whose spec cannot work as written (see ``status.message``).
PHASE_FAILED = c.PHASE_FAILED
#: Backstop poll while children are being deleted (their events normally wake us first).
CLEANUP_POLL = 5.0
#: Retry interval for problems in objects nothing watches (Secrets, ConfigMaps).
SLOW_RETRY = 60.0
_SLOW_RETRY_REASONS = frozenset(
    {
        "MissingGitHubConfigSecret",
        "InvalidGitHubConfigSecret",
        "InvalidGitHubServerTLS",
        "InvalidProxy",
        # The vault is not watched either: an access policy is fixed in Azure.
        "InvalidVaultConfig",
        "InvalidVaultCertificate",
        "VaultAuthenticationFailed",
        "VaultAccessDenied",
        "VaultSecretNotFound",
        "VaultUnavailable",
    }
)

#: Keys of ``ERS.spec.ephemeralRunnerSpec`` this reconciler owns (others, such as
#: ``proxySecretRef``, belong to the ERS reconciler and are neither compared nor patched).
OWNED_RUNNER_SPEC_KEYS = (
    "githubConfigUrl",
    "githubConfigSecret",
    "runnerScaleSetId",
    "proxy",
    "githubServerTLS",
    "vaultConfig",
    "ephemeralRunnerConfigSecretMetadata",
    "metadata",
    "spec",
)

#: Helm-created objects whose ``cleanup-protection`` finalizer we remove, by annotation.
_CLEANUP_TARGETS: tuple[tuple[str, Resource], ...] = (
    (c.ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME, ROLE_BINDINGS),
    (c.ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME, ROLES),
    (c.ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNTS),
    (c.ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNTS),
    (c.ANNOTATION_CLEANUP_GITHUB_SECRET_NAME, SECRETS),
    (c.ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING, ROLE_BINDINGS),
    (c.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME, ROLES),
)

_VERSION_RE = re.compile(r"^(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:\.(0|[1-9]\d*))?$")


def is_version_allowed(resource_version: str, build_version: str) -> bool:
    """ARC ``IsVersionAllowed``: same major.minor (patch ignored), or a dev/canary build."""
    if build_version == "dev" or build_version.startswith("canary-"):
        return True
    if resource_version == build_version:
        return True
    a, b = _VERSION_RE.match(resource_version), _VERSION_RE.match(build_version)
    if not a or not b:
        return False
    return (a.group(1), a.group(2) or "0") == (b.group(1), b.group(2) or "0")


def _settled(ars: Mapping[str, Any]) -> bool:
    """Not deleting, set up, and its current generation applied (see ``_read``)."""
    status = objects.status_of(ars)
    return (
        not objects.is_deleting(ars)
        and objects.has_finalizer(ars, c.FINALIZER_AUTOSCALING_RUNNER_SET)
        and AutoscalingRunnerSetView(ars).scale_set_id is not None
        and status.get("observedGeneration") == ars["metadata"].get("generation")
        and status.get("phase") == c.PHASE_RUNNING
    )


def scale_set_labels(ars: Mapping[str, Any]) -> list[Label]:
    """The scale set name plus ``runnerScaleSetLabels``, de-duplicated, all ``System``."""
    seen: list[str] = []
    for label in [
        AutoscalingRunnerSetView(ars).scale_set_name,
        *(objects.spec_of(ars).get("runnerScaleSetLabels") or []),
    ]:
        if label and label not in seen:
            seen.append(label)
    return [Label(name=n, type="System") for n in seen]


# --- the EphemeralRunnerSet --------------------------------------------------------------


def desired_runner_spec(ars: Mapping[str, Any]) -> JSON:
    """``ERS.spec.ephemeralRunnerSpec`` for the ARS (the owned keys only, unset ones left out)."""
    spec = objects.spec_of(ars)
    template = spec.get("template") or {}
    values: JSON = {
        "githubConfigUrl": spec.get("githubConfigUrl"),
        "githubConfigSecret": spec.get("githubConfigSecret"),
        "runnerScaleSetId": AutoscalingRunnerSetView(ars).scale_set_id,
        "proxy": spec.get("proxy"),
        "githubServerTLS": spec.get("githubServerTLS"),
        "vaultConfig": spec.get("vaultConfig"),
        "ephemeralRunnerConfigSecretMetadata": spec.get("ephemeralRunnerConfigSecretMetadata"),
        "metadata": template.get("metadata"),
        "spec": template.get("spec"),
    }
    return {k: v for k, v in values.items() if v is not None}


def runner_set_labels(ars: Mapping[str, Any], options: ScaleSetOptions) -> dict[str, str]:
    meta, spec = ars["metadata"], objects.spec_of(ars)
    ars_labels = dict(meta.get("labels") or {})
    computed: dict[str, str] = {
        c.LABEL_PART_OF: c.LABEL_VALUE_PART_OF,
        c.LABEL_COMPONENT: c.COMPONENT_RUNNER_SET,
        c.LABEL_SCALE_SET_NAME: meta["name"],
        c.LABEL_SCALE_SET_NAMESPACE: meta["namespace"],
        **lr.url_labels(AutoscalingRunnerSetView(ars).github_config_url),
    }
    if c.LABEL_VERSION in ars_labels:
        computed[c.LABEL_VERSION] = ars_labels[c.LABEL_VERSION]
    base = filter_and_merge_labels(ars_labels, computed, options.exclude_label_propagation_prefixes)
    user = (spec.get("ephemeralRunnerSetMetadata") or {}).get("labels")
    return filter_and_merge_labels(user, base, options.exclude_label_propagation_prefixes) or {}


def runner_set_annotations(ars: Mapping[str, Any]) -> dict[str, str]:
    annotations = ars["metadata"].get("annotations") or {}
    computed = {
        k: annotations[k]
        for k in (c.ANNOTATION_RUNNER_GROUP_NAME, c.ANNOTATION_RUNNER_SCALE_SET_NAME)
        if k in annotations
    }
    user = (objects.spec_of(ars).get("ephemeralRunnerSetMetadata") or {}).get("annotations")
    return merge_annotations(user, computed) or {}


def desired_ephemeral_runner_set(ars: Mapping[str, Any], options: ScaleSetOptions) -> JSON:
    """ARC ``newEphemeralRunnerSet``: replicas and patchID start at 0 and are the listener's."""
    meta, spec = ars["metadata"], objects.spec_of(ars)
    ers_spec: JSON = {
        "replicas": 0,
        "patchID": 0,
        "actionableRevision": 0,
        "ephemeralRunnerSpec": desired_runner_spec(ars),
    }
    if spec.get("ephemeralRunnerMetadata"):
        ers_spec["ephemeralRunnerMetadata"] = spec["ephemeralRunnerMetadata"]
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_EPHEMERAL_RUNNER_SET,
        "metadata": {
            "name": c.ephemeral_runner_set_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": runner_set_labels(ars, options),
            "annotations": runner_set_annotations(ars),
            "ownerReferences": [owner_reference(ars)],
        },
        "spec": ers_spec,
    }


def runner_set_patch(live: Mapping[str, Any], desired: Mapping[str, Any]) -> JSON:
    """The merge patch that brings a live ERS to ``desired`` ({} when nothing differs).

    A runner spec change also bumps ``spec.actionableRevision`` by one, from the live value.
    """
    live_spec, want_spec = objects.spec_of(live), desired["spec"]
    live_runner = live_spec.get("ephemeralRunnerSpec") or {}
    owned = {k: live_runner[k] for k in OWNED_RUNNER_SPEC_KEYS if k in live_runner}
    spec_patch: JSON = {}
    if not objects.semantically_equal(owned, want_spec["ephemeralRunnerSpec"]):
        spec_patch["ephemeralRunnerSpec"] = lr.merge_patch_for(
            owned, want_spec["ephemeralRunnerSpec"]
        )
        spec_patch["actionableRevision"] = EphemeralRunnerSetView(live).actionable_revision + 1
    want_meta = want_spec.get("ephemeralRunnerMetadata")
    if not objects.semantically_equal(live_spec.get("ephemeralRunnerMetadata"), want_meta):
        spec_patch["ephemeralRunnerMetadata"] = want_meta
    patch: JSON = {}
    if spec_patch:
        patch["spec"] = spec_patch
    meta_patch: JSON = {}
    lm, dm = objects.meta(live), desired["metadata"]
    for key in ("labels", "annotations"):
        if not lr.contains_all(lm.get(key), dm.get(key)):
            meta_patch[key] = dict(dm.get(key) or {})
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch


# --- the reconciler ----------------------------------------------------------------------


class AutoscalingRunnerSetReconciler:
    """Reconciles an AutoscalingRunnerSet (see the module docstring for the rules)."""

    def __init__(
        self,
        kube: KubeClient,
        cache: Cache,
        resolver: ClientResolver,
        options: ScaleSetOptions,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.resolver = resolver
        self.options = options
        self.recorder = recorder
        self.secrets = SecretProtection(kube, cache)

    async def reconcile(self, request: Request) -> Result | None:
        return await reconcile_or_wait_for_github(request, self._reconcile)

    async def _reconcile(self, request: Request) -> Result | None:
        return await reconcile_fetched(
            self._read, AUTOSCALING_RUNNER_SETS, request, self.reconcile_autoscaling_runner_set
        )

    async def reconcile_autoscaling_runner_set(self, ars: JSON) -> Result | None:
        request = request_of(ars)
        if objects.is_deleting(ars):
            return await self._finalize(ars)
        version = (ars["metadata"].get("labels") or {}).get(c.LABEL_VERSION)
        if version is not None and not is_version_allowed(version, self.options.build_version):
            log.warning(
                "ARS %s has version %s, not allowed by build %s: deleting it",
                request,
                version,
                self.options.build_version,
            )
            await self.kube.delete(AUTOSCALING_RUNNER_SETS, ars, missing_ok=True)
            return None
        if not objects.has_finalizer(ars, c.FINALIZER_AUTOSCALING_RUNNER_SET):
            ars = dict(
                await add_finalizer(
                    self.kube, AUTOSCALING_RUNNER_SETS, ars, c.FINALIZER_AUTOSCALING_RUNNER_SET
                )
            )
        try:
            self._check_listener_template(ars)
            client = await self._validate(ars)
            ars = await self.secrets.protect(ars)
            ars = await self._ensure_scale_set(ars, client)
        except ConfigurationError as err:
            return await self._report_invalid(ars, err)
        except error_reporting.REPORTED as err:
            if isinstance(err, gherrors.CircuitOpen) and self._reports_github_failure(ars):
                # Held back after the failures this scale set already reports: that cause
                # stands. Reporting "held back" instead would flip the reason (and add an
                # event) between every failed probe and the calls held back after it.
                return Result(requeue_after=gherrors.retry_delay(err, time.time()))
            result = await self._report_failure(ars, *error_reporting.describe(err))
            if isinstance(err, gherrors.RETRY_LATER):
                # Rate limited or held back: come back when GitHub says, not sooner.
                return Result(requeue_after=gherrors.retry_delay(err, time.time()))
            return result

        try:
            ers, ers_applied = await self._ensure_runner_set(ars)
            listener_state, listener_status = await self._ensure_listener(ars)
        except Exception:
            await self._mark_half_applied(ars)
            raise
        if await self._scale_set_gone(ars, client, listener_status):
            return Result(requeue=True)
        applied = ers_applied and listener_state != "changed"
        running = applied and listener_state == "running"
        await self._report_listener(ars, listener_status)
        await self._update_status(
            ars, ers, applied=applied, running=running, listener=listener_status
        )
        return None

    async def _read(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        """The ARS from the cache when it is settled, else from the API server.

        Settled means finalizer and scale set id in place and the last spec change applied
        (``observedGeneration``): the reconcile then only mirrors the runner set's counts,
        which it is woken for on every EphemeralRunnerSet status change, so an uncached
        GET there was most of its calls. Anything with work to do reads uncached.
        """
        try:
            cached = await self.cache.get(resource, name, namespace=namespace)
        except kerrors.NotFound:
            cached = None
        if cached is not None and _settled(cached):
            return copy_object(cached)
        return await self.kube.get(resource, name, namespace=namespace)

    # -- validation --------------------------------------------------------------------
    async def _validate(self, ars: JSON) -> ActionsClient:
        """Spec, URL and credentials, as the user can fix them; ConfigurationError if not."""
        spec = ars.get("spec") or {}  # a dict: the model parses it
        name = str(ars["metadata"]["name"])
        if len(name) > c.MAX_AUTOSCALING_RUNNER_SET_NAME_LENGTH:
            # The CRD accepts longer names (ARC's did), so an ARS stored under ARC's CRDs
            # stays deletable; the listener's name would not fit a label value (63).
            raise ConfigurationError(
                "InvalidName",
                f"metadata.name is {len(name)} characters; at most "
                f"{c.MAX_AUTOSCALING_RUNNER_SET_NAME_LENGTH} fit: the listener is named "
                f"<name>-<8 characters>-listener and that name is a label value (63 at most)",
            )
        try:
            AutoscalingRunnerSetSpec.parse(spec)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ConfigurationError(
                "InvalidSpec", f"spec.{where}: {first.get('msg')}" if where else str(err)
            ) from None
        try:
            parse_config_url(str(spec.get("githubConfigUrl") or ""))
        except InvalidConfigUrl as err:
            raise ConfigurationError("InvalidGitHubConfigUrl", str(err)) from None
        problem = scale_set_name_problem(AutoscalingRunnerSetView(ars).scale_set_name)
        if problem is not None:
            field = "spec.runnerScaleSetName" if spec.get("runnerScaleSetName") else "metadata.name"
            raise ConfigurationError(
                "InvalidScaleSetName", f"{field} {problem}: GitHub refuses such a scale set name"
            )
        bad_proxy = proxy_problems(spec.get("proxy"))
        if bad_proxy:
            raise ConfigurationError("InvalidProxy", "; ".join(bad_proxy))
        if spec.get("scheduledOverrides"):
            try:
                schedule.match_overrides(
                    dt.datetime.now(dt.UTC), spec["scheduledOverrides"], key="minRunners"
                )
            except schedule.ScheduleError as err:
                raise ConfigurationError(
                    "InvalidSchedule", f"spec.scheduledOverrides: {err}"
                ) from None
        target = GitHubTarget.from_spec(ars["metadata"]["namespace"], spec)
        return await self.resolver.client_for(target)

    def _check_listener_template(self, ars: JSON) -> None:
        """Refuse a ``listenerTemplate`` outside the listener policy (docs/security.md).

        Checked before anything exists for the ARS (scale set, ERS, listener), so a
        refused template leaves nothing behind; a listener already running from an
        earlier, allowed template is left as it is.
        """
        if self.options.allow_unrestricted_listener_template or self._template_unused():
            return
        violations = listenerpolicy.template_violations(
            objects.spec_of(ars).get("listenerTemplate"),
            allowed_pull_secrets=self.options.listener_image_pull_secrets,
        )
        if violations:
            raise ConfigurationError(cond.REASON_FORBIDDEN, listenerpolicy.describe(violations))

    def _template_unused(self) -> bool:
        """In-process listeners have no pod for a ``listenerTemplate`` to shape: an ARC
        user's template is kept (it applies again in Pod mode) and reported as not used,
        rather than refusing the scale set over a pod that will never exist."""
        return self.options.listener_in_process

    def _template_condition(self, ars: JSON, forbidden: str | None) -> list[JSON]:
        """``status.conditions`` with ``ListenerTemplateAllowed`` set.

        ``forbidden`` is the violations, or None: the template is checked first, so any
        other outcome of a reconcile means it passed.
        """
        if forbidden is not None:
            verdict = (cond.FALSE, cond.REASON_FORBIDDEN, forbidden)
        elif self._template_unused() and objects.spec_of(ars).get("listenerTemplate"):
            verdict = (
                cond.TRUE,
                cond.REASON_NOT_USED,
                "listeners run in the controller (--listener-mode InProcess): there is no "
                "listener pod, so listenerTemplate is not used",
            )
        elif self.options.allow_unrestricted_listener_template:
            verdict = (cond.TRUE, cond.REASON_UNRESTRICTED, "listener template checks are off")
        else:
            verdict = (cond.TRUE, cond.REASON_ALLOWED, "listener template is allowed")
        conditions = cond.set_condition(
            objects.status_of(ars).get("conditions"),
            cond.LISTENER_TEMPLATE_ALLOWED,
            *verdict,
            generation=int(ars["metadata"].get("generation") or 0),
        )
        return self._runner_cap_condition(ars, conditions)

    def _runner_cap_condition(self, ars: JSON, conditions: list[JSON]) -> list[JSON]:
        """``RunnersCapped``: True while --max-runners-per-scale-set holds the set below
        what it asks; False once it no longer does (absent when it never did)."""
        capped = lr.runner_cap_exceeded(ars, self.options)
        if capped is not None:
            verdict = (cond.TRUE, cond.REASON_CAPPED, capped)
        elif cond.find(conditions, cond.RUNNERS_CAPPED) is not None:
            verdict = (
                cond.FALSE,
                cond.REASON_WITHIN_LIMIT,
                "the set asks for no more runners than the controller allows per scale set",
            )
        else:
            return conditions
        return cond.set_condition(
            conditions,
            cond.RUNNERS_CAPPED,
            *verdict,
            generation=int(ars["metadata"].get("generation") or 0),
        )

    async def _report_invalid(self, ars: JSON, err: ConfigurationError) -> Result | None:
        status = objects.status_of(ars)
        message = f"{err.reason}: {err.message}"
        forbidden = err.message if err.reason == cond.REASON_FORBIDDEN else None
        conditions = cond.set_condition(
            self._template_condition(ars, forbidden),
            cond.SCALE_SET_READY,
            cond.FALSE,
            err.reason,
            err.message,
        )
        reported = status.get("phase") == PHASE_FAILED and status.get("message") == message
        if not reported:
            log.warning(
                "ARS %s/%s is invalid: %s",
                ars["metadata"]["namespace"],
                ars["metadata"]["name"],
                message,
            )
            await emit(self.recorder, ars, WARNING, err.reason, err.message)
        if not reported or (status.get("conditions") or []) != conditions:
            await self._patch_status(
                ars, {"phase": PHASE_FAILED, "message": message, "conditions": conditions}
            )
        if err.reason in _SLOW_RETRY_REASONS:
            return Result(requeue_after=SLOW_RETRY)
        return None  # the next change of the object brings us back

    @staticmethod
    def _reports_github_failure(ars: JSON) -> bool:
        old = cond.find(objects.status_of(ars).get("conditions"), cond.SCALE_SET_READY)
        return (
            old is not None
            and old.get("status") == cond.FALSE
            and str(old.get("reason") or "").startswith("GitHub")
        )

    async def _report_failure(self, ars: JSON, reason: str, message: str) -> Result:
        """GitHub or Kubernetes failed a call for this scale set: say so, retry with backoff.

        One Warning event when the reason changes (each retry only logs); the status is
        written only when reason or message changed, so a steady failure costs no writes.
        """
        status = objects.status_of(ars)
        old = cond.find(status.get("conditions"), cond.SCALE_SET_READY)
        if old is None or old.get("status") != cond.FALSE or old.get("reason") != reason:
            await emit(self.recorder, ars, WARNING, reason, message)
        else:
            meta = ars["metadata"]
            log.info("ARS %s/%s: %s", meta["namespace"], meta["name"], message)
        conditions = cond.set_condition(
            self._template_condition(ars, None), cond.SCALE_SET_READY, cond.FALSE, reason, message
        )
        want: JSON = {"message": f"{reason}: {message}", "conditions": conditions}
        if status.get("phase") != c.PHASE_RUNNING:
            want["phase"] = c.PHASE_PENDING
        if any(status.get(k) != v for k, v in want.items()):
            await self._patch_status(ars, want)
        return Result(requeue=True)  # the work queue's per-key backoff paces the retries

    async def _patch_status(self, ars: JSON, patch: JSON) -> None:
        try:
            updated = await self.kube.patch_status(AUTOSCALING_RUNNER_SETS, ars, {"status": patch})
        except kerrors.NotFound:
            return
        ars["status"] = objects.status_of(updated)

    # -- the scale set in GitHub -------------------------------------------------------
    async def _runner_group_id(self, ars: JSON, client: ActionsClient) -> int:
        group = AutoscalingRunnerSetView(ars).runner_group
        if not group:
            return 1
        try:
            return (await client.get_runner_group_by_name(group)).id
        except gherrors.NotFound:
            raise ConfigurationError(
                "RunnerGroupNotFound", f"runner group {group!r} does not exist"
            ) from None

    async def _patch_meta(self, ars: JSON, annotations: JSON, labels: JSON | None = None) -> JSON:
        meta: JSON = {"annotations": annotations}
        if labels:
            meta["labels"] = labels
        return await self.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS, ars, {"metadata": meta}, optimistic_lock=True
        )

    async def _ensure_scale_set(self, ars: JSON, client: ActionsClient) -> JSON:
        """Create or reuse the scale set, then follow runnerGroup/name changes (§7.3-7.4)."""
        view = AutoscalingRunnerSetView(ars)
        annotations = view.annotations
        scale_set_id, name = view.scale_set_id, view.scale_set_name
        if scale_set_id is None:
            group_id = await self._runner_group_id(ars, client)
            ss = await client.get_runner_scale_set(group_id, name)
            if ss is None:
                ss = await client.create_runner_scale_set(
                    RunnerScaleSet(
                        name=name,
                        runner_group_id=group_id,
                        labels=scale_set_labels(ars),
                        runner_setting=RunnerSetting(disable_update=True),
                    )
                )
                await emit(
                    self.recorder,
                    ars,
                    NORMAL,
                    "ScaleSetCreated",
                    f"created runner scale set {ss.name!r} (id {ss.id})",
                )
            else:
                await emit(
                    self.recorder,
                    ars,
                    NORMAL,
                    "ScaleSetReused",
                    f"using existing runner scale set {ss.name!r} (id {ss.id})",
                )
            return await self._patch_meta(
                ars,
                {
                    c.ANNOTATION_RUNNER_SCALE_SET_ID: str(ss.id),
                    c.ANNOTATION_RUNNER_SCALE_SET_NAME: ss.name or name,
                    c.ANNOTATION_RUNNER_GROUP_NAME: ss.runner_group_name or "",
                },
                lr.url_labels(view.github_config_url),
            )
        group = view.runner_group
        live_group = annotations.get(c.ANNOTATION_RUNNER_GROUP_NAME)
        try:
            if live_group is None or (group and group.casefold() != live_group.casefold()):
                group_id = await self._runner_group_id(ars, client)
                ss = await client.update_runner_scale_set(scale_set_id, {"runnerGroupId": group_id})
                ars = await self._patch_meta(
                    ars,
                    {
                        c.ANNOTATION_RUNNER_GROUP_NAME: ss.runner_group_name or group,
                        c.ANNOTATION_RUNNER_SCALE_SET_NAME: ss.name or name,
                    },
                )
                annotations = AutoscalingRunnerSetView(ars).annotations
            live_name = annotations.get(c.ANNOTATION_RUNNER_SCALE_SET_NAME)
            wanted = str(view.spec.get("runnerScaleSetName") or "")
            if live_name is None or (wanted and wanted.casefold() != live_name.casefold()):
                ss = await client.update_runner_scale_set(scale_set_id, {"name": name})
                ars = await self._patch_meta(
                    ars, {c.ANNOTATION_RUNNER_SCALE_SET_NAME: ss.name or name}
                )
        except gherrors.NotFound:
            # Deleted in GitHub behind our back: forget the id and create it again.
            log.warning(
                "scale set %s of %s/%s is gone in GitHub; recreating it",
                scale_set_id,
                ars["metadata"]["namespace"],
                ars["metadata"]["name"],
            )
            ars = await self._patch_meta(ars, {c.ANNOTATION_RUNNER_SCALE_SET_ID: None})
            return await self._ensure_scale_set(ars, client)
        return ars

    async def _scale_set_gone(
        self, ars: JSON, client: ActionsClient, listener: Mapping[str, Any]
    ) -> bool:
        """While the listener fails, is the scale set still there at GitHub?

        Session creation answers 404 RunnerScaleSetNotFound both when the scale set was
        deleted at GitHub and, during service incidents, when it was not (ARC #3942). The
        listener cannot tell; one GET by id can. Gone: the id annotation is dropped, so the
        next reconcile creates the scale set again and moves the runner set and the
        listener to it; still there: the listener's backoff rides out the incident. Asked
        once per listener failure (this reconcile follows each of its status changes), so
        the restart ladder paces it too.
        """
        if listener.get("phase") not in (PHASE_FAILED, "BackOff"):
            return False
        scale_set_id = AutoscalingRunnerSetView(ars).scale_set_id
        if scale_set_id is None:
            return False
        try:
            if await client.get_runner_scale_set_by_id(scale_set_id) is not None:
                return False
        except gherrors.GitHubError as err:
            log.info("scale set %s check skipped: %s", scale_set_id, err)
            return False
        await emit(
            self.recorder,
            ars,
            WARNING,
            "ScaleSetGone",
            f"runner scale set {scale_set_id} no longer exists at GitHub; creating it again",
        )
        await self._patch_meta(ars, {c.ANNOTATION_RUNNER_SCALE_SET_ID: None})
        return True

    # -- the EphemeralRunnerSet --------------------------------------------------------
    async def _ensure_runner_set(self, ars: JSON) -> tuple[JSON | None, bool]:
        """Create or patch the ERS in place; (ers, True) when it matches the ARS now."""
        desired = desired_ephemeral_runner_set(ars, self.options)
        meta = desired["metadata"]
        try:
            live = await self.cache.get(
                EPHEMERAL_RUNNER_SETS, meta["name"], namespace=meta["namespace"]
            )
        except kerrors.NotFound:
            try:
                created = await self.kube.create(EPHEMERAL_RUNNER_SETS, desired)
            except kerrors.AlreadyExists:
                return None, False  # the cache is behind; its add event brings us back
            await emit(
                self.recorder,
                ars,
                NORMAL,
                "EphemeralRunnerSetCreated",
                f"created EphemeralRunnerSet {meta['name']}",
            )
            return created, True
        if objects.is_deleting(live):
            return live, False
        patch = runner_set_patch(live, desired)
        if not patch:
            return live, True
        updated = await self.kube.merge_patch(
            EPHEMERAL_RUNNER_SETS, live, patch, optimistic_lock=True
        )
        revision = objects.spec_of(patch).get("actionableRevision")
        if revision is not None:
            await emit(
                self.recorder,
                ars,
                NORMAL,
                "RunnerSpecChanged",
                f"runner spec changed: EphemeralRunnerSet {meta['name']} patched in "
                f"place, actionable revision {revision}",
            )
        return updated, True

    # -- the AutoscalingListener -------------------------------------------------------
    async def _listeners_of(self, ars: JSON) -> list[JSON]:
        meta = ars["metadata"]
        return await self.cache.list(
            AUTOSCALING_LISTENERS,
            namespace=self.options.controller_namespace,
            index=(BY_SCALE_SET, f"{meta['namespace']}/{meta['name']}"),
        )

    async def _delete_listener(self, listener: Mapping[str, Any]) -> None:
        meta = listener["metadata"]
        try:
            await self.kube.delete(
                AUTOSCALING_LISTENERS,
                meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
                missing_ok=True,
            )
        except kerrors.Conflict:
            pass  # replaced meanwhile; the next reconcile looks at the new one

    async def _ensure_listener(self, ars: JSON) -> tuple[str, JSON]:
        """``running``, ``waiting`` (applied, not running yet) or ``changed``; and the live
        listener's status (empty while there is none)."""
        desired = lr.desired_listener(ars, self.options)
        name = desired["metadata"]["name"]
        for other in await self._listeners_of(ars):
            if other["metadata"]["name"] != name and not objects.is_deleting(other):
                log.info("deleting listener %s: ARS now uses %s", other["metadata"]["name"], name)
                await self._delete_listener(other)
        try:
            live = await self.cache.get(
                AUTOSCALING_LISTENERS, name, namespace=self.options.controller_namespace
            )
        except kerrors.NotFound:
            try:
                await self.kube.create(AUTOSCALING_LISTENERS, desired)
            except kerrors.AlreadyExists:
                return "changed", {}
            await emit(
                self.recorder,
                ars,
                NORMAL,
                "ListenerCreated",
                f"created AutoscalingListener {self.options.controller_namespace}/{name}",
            )
            return "changed", {}
        if objects.is_deleting(live):
            return "changed", {}
        if lr.listener_needs_rebuild(live, desired):
            await emit(
                self.recorder,
                ars,
                NORMAL,
                "ListenerRecreated",
                f"listener settings changed: recreating AutoscalingListener {name} (a "
                "listener another controller made, ARC's, differs at least in its image); "
                "its pod, Secrets, Role, RoleBinding and ServiceAccount go with it",
            )
            await self._delete_listener(live)
            return "changed", {}
        status = dict(objects.status_of(live))
        return ("running" if status.get("phase") == c.PHASE_RUNNING else "waiting"), status

    # -- status ------------------------------------------------------------------------
    async def _mark_half_applied(self, ars: JSON) -> None:
        """A change failed half-way: say Pending (the retry re-does the work)."""
        status = objects.status_of(ars)
        if status.get("observedGeneration") == ars["metadata"].get("generation"):
            return
        if status.get("phase") == c.PHASE_PENDING:
            return
        try:
            await self._patch_status(ars, {"phase": c.PHASE_PENDING})
        except Exception as err:  # the original error is the one to raise
            log.debug("could not mark %s Pending: %s", ars["metadata"]["name"], err)

    def _listener_condition(self, ars: JSON, listener: Mapping[str, Any]) -> list[JSON]:
        """``status.conditions`` with ``ListenerRunning`` from the listener's own status.

        The listener lives in the controller's namespace, where the scale set's owners may
        not look: its failures (bad credentials, GitHub down) are mirrored here.
        """
        conditions = self._template_condition(ars, None)
        phase = str(listener.get("phase") or c.PHASE_PENDING)
        if phase == c.PHASE_RUNNING:
            return cond.set_condition(
                conditions, cond.LISTENER_RUNNING, cond.TRUE, "Running", "the listener is running"
            )
        message = str(listener.get("message") or f"the listener is {phase.lower()}")
        return cond.set_condition(conditions, cond.LISTENER_RUNNING, cond.FALSE, phase, message)

    async def _report_listener(self, ars: JSON, listener: Mapping[str, Any]) -> None:
        """One Warning event on the scale set when its listener starts failing."""
        phase = listener.get("phase")
        if phase not in (PHASE_FAILED, "BackOff"):
            return
        old = cond.find(objects.status_of(ars).get("conditions"), cond.LISTENER_RUNNING)
        if old is not None and old.get("status") == cond.FALSE and old.get("reason") == phase:
            return  # already reported; the listener's own events carry each retry
        message = str(listener.get("message") or "")
        await emit(self.recorder, ars, WARNING, "ListenerFailing", f"listener: {message}")

    async def _update_status(
        self,
        ars: JSON,
        ers: Mapping[str, Any] | None,
        *,
        applied: bool,
        running: bool,
        listener: Mapping[str, Any] | None = None,
    ) -> None:
        status = objects.status_of(ars)
        ers_status = (ers or {}).get("status") or {}
        want: JSON = {
            "phase": c.PHASE_RUNNING if running else c.PHASE_PENDING,
            "currentRunners": int(ers_status.get("currentReplicas") or 0),
            "pendingEphemeralRunners": int(ers_status.get("pendingEphemeralRunners") or 0),
            "runningEphemeralRunners": int(ers_status.get("runningEphemeralRunners") or 0),
            "failedEphemeralRunners": int(ers_status.get("failedEphemeralRunners") or 0),
            "finishedEphemeralRunners": int(ers_status.get("finishedEphemeralRunners") or 0),
            "deletingEphemeralRunners": int(ers_status.get("deletingEphemeralRunners") or 0),
        }
        listener = listener or {}
        failing = listener.get("phase") in (PHASE_FAILED, "BackOff")
        if failing:
            want["message"] = f"listener: {listener.get('message') or listener.get('phase')}"
        elif status.get("message"):
            want["message"] = None
        want["conditions"] = cond.set_condition(
            self._listener_condition(ars, listener),
            cond.SCALE_SET_READY,
            cond.TRUE,
            cond.REASON_READY,
            f"runner scale set {AutoscalingRunnerSetView(ars).scale_set_id} exists in GitHub",
        )
        if applied:
            want["observedGeneration"] = int(ars["metadata"].get("generation") or 0)
        capped = cond.find(want["conditions"], cond.RUNNERS_CAPPED)
        was = cond.find(status.get("conditions"), cond.RUNNERS_CAPPED)
        said = was is not None and (was.get("status"), was.get("message")) == (
            cond.TRUE,
            (capped or {}).get("message"),
        )
        if capped is not None and capped.get("status") == cond.TRUE and not said:
            await emit(self.recorder, ars, WARNING, cond.REASON_CAPPED, str(capped["message"]))
        if any(status.get(k) != v for k, v in want.items()):
            await self._patch_status(ars, want)

    # -- deletion ----------------------------------------------------------------------
    async def _finalize(self, ars: JSON) -> Result | None:
        """Listener, then ERS (waited for), then the GitHub scale set, then finalizers."""
        if not objects.has_finalizer(ars, c.FINALIZER_AUTOSCALING_RUNNER_SET):
            return None
        meta = ars["metadata"]
        listeners = {x["metadata"]["name"]: x for x in await self._listeners_of(ars)}
        try:
            own = await self.kube.get(
                AUTOSCALING_LISTENERS,
                c.listener_name_for(ars),
                namespace=self.options.controller_namespace,
            )
            listeners[own["metadata"]["name"]] = own
        except kerrors.NotFound:
            pass
        if listeners:
            for listener in listeners.values():
                if not objects.is_deleting(listener):
                    await self._delete_listener(listener)
            return Result(requeue_after=CLEANUP_POLL)
        try:
            ers = await self.kube.get(
                EPHEMERAL_RUNNER_SETS,
                c.ephemeral_runner_set_name(meta["name"]),
                namespace=meta["namespace"],
            )
            if not objects.is_deleting(ers):
                await self.kube.delete(EPHEMERAL_RUNNER_SETS, ers, missing_ok=True)
            return Result(requeue_after=CLEANUP_POLL)
        except kerrors.NotFound:
            pass
        ars = await self._delete_scale_set(ars)
        # The Secret first: the controller may read Secrets here only through the manager
        # RoleBinding, whose finalizer the cleanup below releases.
        await self.secrets.release(ars)
        await self._remove_cleanup_finalizers(ars)
        await remove_finalizer(
            self.kube, AUTOSCALING_RUNNER_SETS, ars, c.FINALIZER_AUTOSCALING_RUNNER_SET
        )
        log.info("ARS %s/%s cleaned up", meta["namespace"], meta["name"])
        return None

    async def _delete_scale_set(self, ars: JSON) -> JSON:
        scale_set_id = AutoscalingRunnerSetView(ars).scale_set_id
        if scale_set_id is None:
            return ars
        try:
            client = await self._validate(ars)
            await client.delete_runner_scale_set(scale_set_id)
            await emit(
                self.recorder,
                ars,
                NORMAL,
                "ScaleSetDeleted",
                f"deleted runner scale set {scale_set_id}",
            )
        except gherrors.NotFound:
            log.info("scale set %s was already deleted in GitHub", scale_set_id)
        except ConfigurationError as err:
            # No way to reach GitHub any more (secret deleted first, e.g. by Helm): do not
            # hold the ARS hostage; say what was left behind.
            await emit(
                self.recorder,
                ars,
                WARNING,
                "ScaleSetNotDeleted",
                f"runner scale set {scale_set_id} left in GitHub: {err.message}",
            )
        try:
            return await self._patch_meta(ars, {c.ANNOTATION_RUNNER_SCALE_SET_ID: None})
        except kerrors.NotFound:
            return ars

    async def _remove_cleanup_finalizers(self, ars: JSON) -> None:
        """Drop ``cleanup-protection`` from the Helm-created objects named in annotations."""
        annotations = ars["metadata"].get("annotations") or {}
        ns = ars["metadata"]["namespace"]
        for key, resource in _CLEANUP_TARGETS:
            name = annotations.get(key)
            if not name:
                continue
            try:
                obj = await self.kube.get(resource, name, namespace=ns)
            except kerrors.NotFound:
                continue
            except kerrors.Forbidden:
                if resource is SECRETS:
                    continue
                # Releasing the manager RoleBinding ends the namespace's `get` rights, so
                # the manager Role (and, on a retry, the objects before it) are found with
                # the controller's own list/watch rule, as ARC reads them from its cache.
                found = await self.kube.list(
                    resource, namespace=ns, field_selector=f"metadata.name={name}"
                )
                if not found:
                    continue
                obj = found[0]
            await remove_finalizer(self.kube, resource, obj, c.FINALIZER_CLEANUP_PROTECTION)


def listener_to_runner_set(obj: Mapping[str, Any]) -> Iterable[Request]:
    """An AutoscalingListener event wakes the ARS it belongs to."""
    view = AutoscalingListenerView(obj)
    ns, name = view.ars_namespace, view.ars_name
    return [Request(ns, name)] if ns and name else []


BY_SCALE_SET = "scale-set"
"""The listeners' index by the scale set they serve ("namespace/name"): every listener lives
in the controller's namespace, so a label selector there scanned all of them on every set's
reconcile (at 1,000 sets, most of the idle controller's CPU)."""


def index_by_scale_set(obj: Mapping[str, Any]) -> list[str]:
    labels = objects.meta(obj).get("labels") or {}
    ns, name = labels.get(c.LABEL_SCALE_SET_NAMESPACE), labels.get(c.LABEL_SCALE_SET_NAME)
    return [f"{ns}/{name}"] if ns and name else []


#: What the listener writes on the EphemeralRunnerSet for every job: the set reads neither (its
#: status mirrors the runner set's status), so those writes do not wake it (2.6 a job).
RUNNER_SET_SCALE_FIELDS = ("spec.replicas", "spec.patchID")
#: The in-process listener's last-message time: the set's listener condition reads the phase
#: and message only.
LISTENER_HEARTBEAT_FIELD = "status.lastMessageTime"


def setup(manager: ManagerLike, deps: ScaleSetDeps) -> Controller:
    """The AutoscalingRunnerSet controller: ``For(ARS)``, ``Owns(EphemeralRunnerSet)``,
    ``Watches(AutoscalingListener)`` mapped to ``spec.autoscalingRunnerSetNamespace/Name``
    (listeners live in another namespace, so owner references cannot link them).

    With ``deps.watch_namespace``, events of sets (and of their runner sets) in other
    namespaces are filtered out before they are queued: the cache also holds the
    controller's namespace, where listeners live."""
    manager.cache.add_indexer(AUTOSCALING_LISTENERS, BY_SCALE_SET, index_by_scale_set)
    reconciler = AutoscalingRunnerSetReconciler(
        deps.client(manager), manager.cache, deps.resolver, deps.options, deps.recorder
    )
    scope: tuple[Predicate, ...] = ()
    to_runner_set: Callable[[Mapping[str, Any]], Iterable[Request]] = listener_to_runner_set
    if deps.watch_namespace:
        scope = (InNamespace(deps.watch_namespace),)
        to_runner_set = _in_namespace(listener_to_runner_set, deps.watch_namespace)
    return (
        Builder(manager)
        .named("autoscalingrunnerset")
        .for_(AUTOSCALING_RUNNER_SETS, ResourceVersionChangedPredicate(), *scope)
        .owns(EPHEMERAL_RUNNER_SETS, ChangedBesides(*RUNNER_SET_SCALE_FIELDS), *scope)
        .watches(AUTOSCALING_LISTENERS, to_runner_set, ChangedBesides(LISTENER_HEARTBEAT_FIELD))
        .complete(reconciler)
    )


def _in_namespace(
    map_fn: Callable[[Mapping[str, Any]], Iterable[Request]], namespace: str
) -> Callable[[Mapping[str, Any]], Iterable[Request]]:
    """``map_fn``'s requests for ``namespace`` only (a listener lives in the controller's
    namespace but names a set that may live elsewhere)."""

    def mapped(obj: Mapping[str, Any]) -> Iterable[Request]:
        return [r for r in map_fn(obj) if r.namespace == namespace]

    return mapped
