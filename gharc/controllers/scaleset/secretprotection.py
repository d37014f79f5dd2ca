"""Keep an AutoscalingRunnerSet's GitHub Secret until the scale set is finalized.

Deleting a scale set means deleting its runner scale set at GitHub, which needs the
credentials. When the Secret goes first (``kubectl delete -f`` of a manifest holding both,
a namespace deletion, a Helm release that owns a pre-created Secret) the controller can no
longer reach GitHub: the scale set stays there, and its running jobs are cancelled without
a runner to finish them. So every AutoscalingRunnerSet puts a finalizer on the Secret it
uses and takes it off only after its own finalization, when no other scale set of the
namespace still uses that Secret.

The Secret that was protected is recorded in an annotation on the AutoscalingRunnerSet, so
a changed ``githubConfigSecret`` releases the old one, and a controller restart does not
forget what it protected.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gharc.api.resources import AUTOSCALING_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient, Reader
from gharc.kube.finalizers import add_finalizer, remove_finalizer
from gharc.kube.resources import SECRETS

__all__ = ["SecretProtection"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]


def _secret_name(ars: Mapping[str, Any]) -> str:
    return str(objects.spec_of(ars).get("githubConfigSecret") or "")


def _recorded(ars: Mapping[str, Any]) -> str:
    annotations = objects.meta(ars).get("annotations") or {}
    return str(annotations.get(c.ANNOTATION_PROTECTED_GITHUB_SECRET) or "")


class SecretProtection:
    """Adds and releases the Secret finalizer; one GET per Secret and controller life."""

    def __init__(self, kube: KubeClient, cache: Reader) -> None:
        self.kube = kube
        self.cache = cache
        self._protected: dict[tuple[str, str], str] = {}
        """(namespace, secret name) known to carry the finalizer -> the Secret's uid. A dict:
        every reconcile of every scale set asks (a scan of a set was a tenth of the 1,000-set
        controller's CPU)."""

    async def protect(self, ars: JSON) -> JSON:
        """Finalizer on the Secret ``ars`` uses; the old one released if the name changed."""
        ns, name = ars["metadata"]["namespace"], _secret_name(ars)
        recorded = _recorded(ars)
        if not name or (recorded == name and (ns, name) in self._protected):
            return ars
        try:
            secret = await self.kube.get(SECRETS, name, namespace=ns)
        except kerrors.NotFound:
            return ars  # validation reports the missing Secret
        if not objects.is_deleting(secret) and not objects.has_finalizer(
            secret, c.FINALIZER_GITHUB_SECRET_PROTECTION
        ):
            await add_finalizer(self.kube, SECRETS, secret, c.FINALIZER_GITHUB_SECRET_PROTECTION)
            log.info(
                "Secret %s/%s protected until scale set %s is finalized",
                ns,
                name,
                ars["metadata"]["name"],
            )
        self._protected[(ns, name)] = str(secret["metadata"].get("uid") or "")
        if recorded != name:
            if recorded:
                await self.release(ars, recorded)
            ars = await self.kube.merge_patch(
                AUTOSCALING_RUNNER_SETS,
                ars,
                {"metadata": {"annotations": {c.ANNOTATION_PROTECTED_GITHUB_SECRET: name}}},
            )
        return ars

    async def release(self, ars: Mapping[str, Any], name: str | None = None) -> None:
        """Take the finalizer off Secret ``name`` (default: the recorded one) unless another
        live scale set of the namespace uses it."""
        ns = ars["metadata"]["namespace"]
        name = name or _recorded(ars) or _secret_name(ars)
        if not name:
            return
        uid = ars["metadata"].get("uid")
        for other in await self.cache.list(AUTOSCALING_RUNNER_SETS, namespace=ns):
            if objects.meta(other).get("uid") == uid or objects.is_deleting(other):
                continue
            if _secret_name(other) == name:
                return  # still needed by another scale set
        try:
            secret = await self.kube.get(SECRETS, name, namespace=ns)
        except kerrors.NotFound:
            return
        await remove_finalizer(self.kube, SECRETS, secret, c.FINALIZER_GITHUB_SECRET_PROTECTION)
        self._protected.pop((ns, name), None)
        log.info("Secret %s/%s released", ns, name)
