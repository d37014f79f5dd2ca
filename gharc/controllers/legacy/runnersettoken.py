"""The registration token of a RunnerSet's pods, kept in a Secret the pods reference.

ARC injects the token into each RunnerSet pod as a literal env value through its
``/mutate-runner-set-pod`` admission webhook, so anyone who can read pods can register a
rogue runner for the token's hour. gharc writes the token into one Secret per RunnerSet,
refreshed before it expires, and the StatefulSet's pod template references it
(``secretKeyRef``), with ``RUNNER_NAME`` from the downward API. The real StatefulSet
controller then needs no webhook, and a token refresh does not change the pod template,
so it never rolls the runners.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

from gharc.api.legacy import constants as c
from gharc.controllers.legacy.githubclients import LegacyGitHub, RunnerScope
from gharc.controllers.legacy.resources import owner_ref
from gharc.controllers.legacy.runner import credentials_secret
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.client import KubeClient
from gharc.kube.resources import SECRETS

JSON = dict[str, Any]

#: Key of the token in the Secret.
TOKEN_KEY = "token"
#: Annotation on the Secret: when the token in it expires (RFC 3339).
ANNOTATION_EXPIRES_AT = "actions-runner-controller/token-expires-at"
#: Label on the Secret: the RunnerSet it belongs to.
LABEL_RUNNER_SET = "actions-runner-controller/registration-token-of-runnerset"


def token_secret_name(runner_set_name: str) -> str:
    """``<runnerset>-runnerset-registration``: distinct from a Runner's ``<runner>-registration``
    even when a Runner and a RunnerSet share a name."""
    return f"{runner_set_name}-runnerset-registration"


def reference_token_secret(pod: JSON, runner_set_name: str) -> bool:
    """Point the runner container's ``RUNNER_NAME`` and ``RUNNER_TOKEN`` at the pod's name and
    the RunnerSet's token Secret, unless the user set them. Only a runner container that names
    its scope (RUNNER_ENTERPRISE/REPO/ORG, as ARC's webhook requires) is touched."""
    containers = list(objects.spec_of(pod).get("containers") or [])
    ctr = next((x for x in containers if x.get("name") == c.CONTAINER_RUNNER), None)
    if ctr is None:
        return False
    names = {e.get("name") for e in ctr.get("env") or ()}
    if not {"RUNNER_ENTERPRISE", "RUNNER_REPO", "RUNNER_ORG"} <= names:
        return False
    env = ctr.setdefault("env", [])
    if "RUNNER_NAME" not in names:
        env.append(
            {"name": "RUNNER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        )
    if "RUNNER_TOKEN" not in names:
        ref = {"name": token_secret_name(runner_set_name), "key": TOKEN_KEY}
        env.append({"name": "RUNNER_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return True


class RunnerSetTokens:
    """Keeps each RunnerSet's token Secret valid; remembers expiry times so a reconcile reads
    the Secret from the API server only after a restart, not on every pass."""

    def __init__(
        self,
        kube: KubeClient,
        github: LegacyGitHub,
        min_remaining: dt.timedelta = c.REGISTRATION_TOKEN_MIN_REMAINING,
    ) -> None:
        self.kube, self.github, self.min_remaining = kube, github, min_remaining
        self._expires: dict[str, dt.datetime] = {}
        """RunnerSet uid -> expiry of the token its Secret holds."""

    def forget(self, uid: str) -> None:
        self._expires.pop(uid, None)

    async def ensure(self, rs: Mapping[str, Any], now: dt.datetime) -> float:
        """Make the Secret hold a token valid for ``min_remaining``; seconds until the next
        refresh is due. GitHub and scope errors propagate to the caller, which reports them."""
        meta = rs["metadata"]
        uid = str(meta["uid"])
        expires = self._expires.get(uid)
        if expires is None:
            expires = await self._stored_expiry(rs)
        if expires is None or expires - now < self.min_remaining:
            expires = await self._refresh(rs)
        self._expires[uid] = expires
        return max((expires - self.min_remaining - now).total_seconds(), 1.0)

    async def _stored_expiry(self, rs: Mapping[str, Any]) -> dt.datetime | None:
        meta = rs["metadata"]
        try:
            secret = await self.kube.get(
                SECRETS, token_secret_name(meta["name"]), namespace=meta["namespace"]
            )
        except kerrors.NotFound:
            return None
        if not (secret.get("data") or {}).get(TOKEN_KEY):
            return None
        return objects.parse_time(objects.annotations_of(secret).get(ANNOTATION_EXPIRES_AT))

    async def _refresh(self, rs: Mapping[str, Any]) -> dt.datetime:
        meta, spec = rs["metadata"], objects.spec_of(rs)
        client = await self.github.client(
            meta["namespace"], RunnerScope.from_spec(spec), credentials_secret(spec)
        )
        token = await client.create_registration_token()
        expires_at = objects.format_time(token.expires_at)
        name = token_secret_name(meta["name"])
        body: JSON = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {LABEL_RUNNER_SET: str(meta["name"])},
                "annotations": {ANNOTATION_EXPIRES_AT: expires_at},
                "ownerReferences": [owner_ref(rs)],
            },
            "type": "Opaque",
            "data": {TOKEN_KEY: base64.b64encode(token.token.encode()).decode()},
        }
        try:
            await self.kube.create(SECRETS, body)
        except kerrors.AlreadyExists:
            patch = {"metadata": {"annotations": {ANNOTATION_EXPIRES_AT: expires_at}}}
            patch["data"] = body["data"]
            await self.kube.merge_patch(SECRETS, name, patch, namespace=meta["namespace"])
        return token.expires_at
