"""AutoscalingRunnerSet creation and deletion against the real API server + fake GitHub."""

from __future__ import annotations

from typing import Any

from _arsworld import SECRET_NAME, World, running_world

from gharc.api.resources import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
)
from gharc.api.scaleset import constants as c
from gharc.kube.resources import PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS
from testworld.wait import eventually


async def _created(w: World) -> dict[str, Any]:
    """Create the ARS and wait for every object it leads to; returns them by kind."""
    await w.create_ars("arc", runnerScaleSetLabels=["linux", "arc"])
    ars = await w.wait_ars(
        lambda a: c.ANNOTATION_RUNNER_SCALE_SET_ID in (a["metadata"].get("annotations") or {}),
        message="scale set id annotation",
    )
    name = w.listener_name(ars)
    pod = await w.wait_listener_pod(ars)
    return {
        "ars": await w.ars(),
        "name": name,
        "pod": pod,
        "ers": await w.ers(),
        "listener": await w.listener(ars),
        "sa": await w.get_or_none(SERVICE_ACCOUNTS, name),
        "role": await eventually(lambda: w.get_or_none(ROLES, name)),
        "binding": await eventually(lambda: w.get_or_none(ROLE_BINDINGS, name)),
        "config": await w.get_or_none(SECRETS, c.listener_config_secret_name(name)),
    }


async def test_creation_makes_scale_set_runner_set_listener_and_its_objects(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        o = await _created(w)
        ars, ers, listener, name = o["ars"], o["ers"], o["listener"], o["name"]

        # GitHub: one scale set named after the ARS, labels de-duplicated, updates disabled.
        sets = list(w.gh.state.scale_sets.values())
        assert len(sets) == 1
        ss = sets[0]
        assert ss.name == "arc"
        assert ss.labels == ["arc", "linux"]
        assert ss.runner_setting["disableUpdate"] is True
        annotations = ars["metadata"]["annotations"]
        assert annotations[c.ANNOTATION_RUNNER_SCALE_SET_ID] == str(ss.id)
        assert annotations[c.ANNOTATION_RUNNER_SCALE_SET_NAME] == "arc"
        assert annotations[c.ANNOTATION_RUNNER_GROUP_NAME] == "Default"
        assert ars["metadata"]["labels"][c.LABEL_GITHUB_ORGANIZATION] == "octo-org"
        assert c.FINALIZER_AUTOSCALING_RUNNER_SET in ars["metadata"]["finalizers"]

        # The EphemeralRunnerSet: same name, replicas 0, owned by the ARS.
        assert ers is not None
        assert ers["spec"]["replicas"] == 0 and ers["spec"]["patchID"] == 0
        assert ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == ss.id
        assert ers["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"] == "runner:1"
        (owner,) = ers["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            c.KIND_AUTOSCALING_RUNNER_SET,
            "arc",
            ars["metadata"]["uid"],
            True,
        )
        assert ers["metadata"]["labels"][c.LABEL_COMPONENT] == c.COMPONENT_RUNNER_SET

        # The listener: controller namespace, computed name, no owner reference.
        assert listener is not None
        assert name.startswith("arc-") and name.endswith("-listener")
        assert not listener["metadata"].get("ownerReferences")
        assert c.FINALIZER_AUTOSCALING_LISTENER in listener["metadata"]["finalizers"]
        spec = listener["spec"]
        assert (spec["minRunners"], spec["maxRunners"], spec["runnerScaleSetId"]) == (0, 3, ss.id)
        assert spec["ephemeralRunnerSetName"] == "arc"
        assert spec["autoscalingRunnerSetName"] == "arc"
        assert listener["metadata"]["labels"][c.LABEL_COMPONENT] == c.COMPONENT_LISTENER

        # Its ServiceAccount, Role, RoleBinding, config secret and pod.
        owned_by_listener = {
            "kind": c.KIND_AUTOSCALING_LISTENER,
            "name": name,
            "uid": listener["metadata"]["uid"],
        }
        for obj in (o["sa"], o["config"], o["pod"]):
            (ref,) = obj["metadata"]["ownerReferences"]
            assert {k: ref[k] for k in owned_by_listener} == owned_by_listener
        role, binding = o["role"], o["binding"]
        assert role["rules"] == c.listener_role_rules(["arc"])
        assert not role["metadata"].get("ownerReferences")
        assert role["metadata"]["labels"][c.LABEL_LISTENER_NAME] == name
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "namespace": namespace, "name": name}
        ]
        config = await w.config_json(ars)
        assert config["configure_url"] == w.gh.config_url()
        assert config["github_token"] == w.gh.token
        assert config["runner_scale_set_id"] == ss.id
        assert config["ephemeral_runner_set_name"] == "arc"
        assert (config["min_runners"], config["max_runners"]) == (0, 3)
        pod_spec = o["pod"]["spec"]
        assert pod_spec["serviceAccountName"] == name
        assert pod_spec["restartPolicy"] == "Never"
        (container,) = pod_spec["containers"]
        assert container["name"] == "listener" and container["image"] == "gharc:test"
        assert container["command"] == ["gharc", "listener"]
        assert {"name": "LISTENER_CONFIG_PATH", "value": c.LISTENER_CONFIG_PATH} in container["env"]

        # Pending until the listener runs, then Running with the generation observed.
        await w.wait_ars(lambda a: (a.get("status") or {}).get("phase") == c.PHASE_PENDING)
        await w.run_listener(o["pod"])
        done = await w.wait_ars(lambda a: (a.get("status") or {}).get("phase") == "Running")
        assert done["status"]["observedGeneration"] == done["metadata"]["generation"]


async def test_deletion_cleans_up_everything_including_the_scale_set(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        # A Helm-created Role protected by the cleanup finalizer, named in an annotation.
        await w.kube.create(
            ROLES,
            {
                "metadata": {
                    "name": "manager-role",
                    "namespace": namespace,
                    "finalizers": [c.FINALIZER_CLEANUP_PROTECTION],
                },
                "rules": [],
            },
        )
        o = await _created(w)
        await w.kube.merge_patch(
            AUTOSCALING_RUNNER_SETS,
            "arc",
            {"metadata": {"annotations": {c.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: "manager-role"}}},
            namespace=namespace,
        )
        assert len(w.gh.state.scale_sets) == 1
        # helm uninstall deletes the Role; the finalizer holds it until the ARS is cleaned up.
        await w.kube.delete(ROLES, "manager-role", namespace=namespace)
        assert await w.get_or_none(ROLES, "manager-role") is not None
        await w.kube.delete(AUTOSCALING_RUNNER_SETS, "arc", namespace=namespace)

        await eventually(
            lambda: _gone(w, AUTOSCALING_RUNNER_SETS, "arc"), timeout=30, message="ARS gone"
        )
        name = o["name"]
        for resource, obj in (
            (AUTOSCALING_LISTENERS, name),
            (EPHEMERAL_RUNNER_SETS, "arc"),
            (PODS, name),
            (SECRETS, c.listener_config_secret_name(name)),
            (ROLE_BINDINGS, name),
            (ROLES, name),
            (SERVICE_ACCOUNTS, name),
            (ROLES, "manager-role"),
        ):
            assert await w.get_or_none(resource, obj) is None, (resource, obj)
        assert w.gh.state.scale_sets == {}


async def test_deletion_proceeds_when_github_already_deleted_the_scale_set(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await _created(w)
        (scale_set_id,) = list(w.gh.state.scale_sets)
        w.gh.state.delete_scale_set(scale_set_id)
        await w.kube.delete(AUTOSCALING_RUNNER_SETS, "arc", namespace=namespace)
        await eventually(
            lambda: _gone(w, AUTOSCALING_RUNNER_SETS, "arc"), timeout=30, message="ARS gone"
        )
        assert w.gh.calls("*/runnerscalesets/{scale_set_id}", method="DELETE") >= 1


async def _gone(w: World, resource: Any, name: str) -> bool:
    return await w.get_or_none(resource, name) is None


async def test_secret_deleted_with_the_scale_set_is_kept_until_github_is_cleaned_up(
    kubeconfig: str, namespace: str
) -> None:
    """no-job-stranded §5: a pre-created Secret deleted together with its scale set."""
    async with running_world(kubeconfig, namespace) as w:
        await _created(w)

        async def protected() -> bool:
            secret = await w.get_or_none(SECRETS, SECRET_NAME)
            finalizers = (secret or {}).get("metadata", {}).get("finalizers") or []
            return c.FINALIZER_GITHUB_SECRET_PROTECTION in finalizers

        await eventually(protected, timeout=15, message="the GitHub Secret protected")
        assert len(w.gh.state.scale_sets) == 1
        # `kubectl delete -f` of a manifest with both: the Secret goes first.
        await w.kube.delete(SECRETS, SECRET_NAME, namespace=namespace)
        await w.kube.delete(AUTOSCALING_RUNNER_SETS, "arc", namespace=namespace)
        await eventually(
            lambda: _gone(w, AUTOSCALING_RUNNER_SETS, "arc"), timeout=30, message="ARS gone"
        )
        assert w.gh.state.scale_sets == {}  # deleted at GitHub with the Secret's credentials
        await eventually(lambda: _gone(w, SECRETS, SECRET_NAME), timeout=15, message="released")
