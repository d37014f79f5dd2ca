"""ARC 0.12+ resource metadata: each ``*Metadata`` field of an AutoscalingRunnerSet lands on
the one object it names, and a change to it reaches that object.

Eight fields, eight objects: the AutoscalingListener, the listener's ServiceAccount, Role,
RoleBinding and config Secret, the EphemeralRunnerSet, each EphemeralRunner and each
runner's JIT config Secret. Every field carries a label and an annotation keyed by its own
name. Keys differ between fields on purpose: as in ARC, an object also inherits its
parent's labels (the listener's reach its ServiceAccount, the set's its runners), and an
inherited key wins over the same key in the object's own field.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from _arsworld import World, running_world

from gharc.api.resources import AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.kube import errors as kerrors
from gharc.kube.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from testworld.wait import eventually

JSON = dict[str, Any]
PREFIX = "meta.example.com/"

#: The AutoscalingRunnerSet spec fields, one per object made for the set.
FIELDS = (
    "autoscalingListener",
    "listenerServiceAccountMetadata",
    "listenerRoleMetadata",
    "listenerRoleBindingMetadata",
    "listenerConfigSecretMetadata",
    "ephemeralRunnerSetMetadata",
    "ephemeralRunnerMetadata",
    "ephemeralRunnerConfigSecretMetadata",
)


def _meta(field: str, note: str = "v1") -> JSON:
    return {"labels": {PREFIX + field: note}, "annotations": {PREFIX + field: f"{field}-{note}"}}


def _all_meta(note: str = "v1") -> JSON:
    return {field: _meta(field, note) for field in FIELDS}


async def _objects(w: World, ars: JSON) -> dict[str, JSON] | None:
    """Every object of the eight, by the field that should have reached it (None until all
    exist: the runner and its JIT Secret come after the scale-up)."""
    listener_name = w.listener_name(ars)
    named: list[tuple[str, Resource, Callable[[str], str]]] = [
        ("listenerServiceAccountMetadata", SERVICE_ACCOUNTS, c.listener_service_account_name),
        ("listenerRoleMetadata", ROLES, c.listener_role_name),
        ("listenerRoleBindingMetadata", ROLE_BINDINGS, c.listener_role_binding_name),
        ("listenerConfigSecretMetadata", SECRETS, c.listener_config_secret_name),
    ]
    out: dict[str, JSON] = {}
    listener = await w.listener(ars)
    if listener is None:
        return None
    out["autoscalingListener"] = listener
    for field, resource, name_of in named:
        obj = await w.get_or_none(resource, name_of(listener_name))
        if obj is None:
            return None
        out[field] = obj
    ers = await w.ers(c.ephemeral_runner_set_name("arc"))
    if ers is None:
        return None
    out["ephemeralRunnerSetMetadata"] = ers
    runners = await w.kube.list(EPHEMERAL_RUNNERS, namespace=w.namespace)
    if not runners:
        return None
    out["ephemeralRunnerMetadata"] = runners[0]
    secret = await w.get_or_none(SECRETS, c.runner_jit_secret_name(runners[0]["metadata"]["name"]))
    if secret is None:
        return None
    out["ephemeralRunnerConfigSecretMetadata"] = secret
    return out


def _carries(obj: JSON, field: str, note: str) -> bool:
    meta = obj["metadata"]
    return bool(
        (meta.get("labels") or {}).get(PREFIX + field) == note
        and (meta.get("annotations") or {}).get(PREFIX + field) == f"{field}-{note}"
    )


async def _scale_to_one(w: World) -> None:
    """Play the listener: ask the EphemeralRunnerSet for one runner."""
    name = c.ephemeral_runner_set_name("arc")
    await eventually(lambda: w.ers(name), timeout=20, message="EphemeralRunnerSet")
    await w.kube.merge_patch(
        EPHEMERAL_RUNNER_SETS,
        name,
        {"spec": {"replicas": 1, "patchID": 1}},
        namespace=w.namespace,
    )


async def _wait_all_carry(w: World, note: str) -> dict[str, JSON]:
    async def probe() -> dict[str, JSON] | None:
        ars = await w.ars()
        objects = await _objects(w, ars)
        if objects is None:
            return None
        return objects if all(_carries(objects[f], f, note) for f in FIELDS) else None

    try:
        return await eventually(probe, timeout=30, message=f"metadata {note} on every object")
    except Exception:
        objects = await _objects(w, await w.ars()) or {}
        missing = {
            f: objects[f]["metadata"]
            for f in FIELDS
            if f in objects and not _carries(objects[f], f, note)
        }
        raise AssertionError(f"objects without their metadata ({note}): {missing}") from None


async def test_each_metadata_field_lands_on_its_own_object(kubeconfig: str, namespace: str) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc", **_all_meta())
        await _scale_to_one(w)
        objects = await _wait_all_carry(w, "v1")
        # Reserved labels are kept: the user's metadata adds, it does not replace.
        ers_labels = objects["ephemeralRunnerSetMetadata"]["metadata"]["labels"]
        assert ers_labels[c.LABEL_SCALE_SET_NAME] == "arc"
        sa_labels = objects["listenerServiceAccountMetadata"]["metadata"]["labels"]
        assert sa_labels[c.LABEL_SCALE_SET_NAMESPACE] == namespace


async def test_a_metadata_change_reaches_every_object(kubeconfig: str, namespace: str) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc", **_all_meta())
        await _scale_to_one(w)
        await _wait_all_carry(w, "v1")
        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS, "arc", {"spec": _all_meta("v2")}, namespace=w.namespace
        )
        # ephemeralRunnerMetadata and the JIT Secret's apply to runners made after the
        # change (ARC's rule): finish the first runner's life so a new one is made.
        ers_name = c.ephemeral_runner_set_name("arc")

        async def updated_set() -> bool:
            ers = await w.ers(ers_name)
            return ers is not None and _carries(ers, "ephemeralRunnerSetMetadata", "v2")

        await eventually(updated_set, timeout=30, message="EphemeralRunnerSet metadata v2")
        for er in await w.kube.list(EPHEMERAL_RUNNERS, namespace=w.namespace):
            # A runner listed may be gone already: the set's new template rolls idle runners.
            runner = er["metadata"]["name"]
            with contextlib.suppress(kerrors.NotFound):
                await w.kube.delete(EPHEMERAL_RUNNERS, runner, namespace=w.namespace)
        await _wait_all_carry(w, "v2")
