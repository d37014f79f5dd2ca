"""Legacy (summerwind) objects as the tests write them, built in one place.

The same RunnerSet is created by the envtest tier (the StatefulSets the controller writes),
by the real-node tier (what the StatefulSet controller makes of them) and by the CRD
tests, and the same RunnerDeployment and webhook-scaled HRA by the chart and webhook
tests; written out in each, the copies drift apart in ways nobody meant.
"""

from __future__ import annotations

from typing import Any

from gharc.api.legacy import constants as lc
from testworld.sim.github import DEFAULT_REPO

JSON = dict[str, Any]

__all__ = [
    "horizontal_runner_autoscaler",
    "runner_deployment",
    "runner_set",
    "volume_claim_template",
]


def volume_claim_template(name: str, storage_class: str, size: str = "10Mi") -> JSON:
    """A ``volumeClaimTemplates`` item: one ReadWriteOnce volume of ``size``."""
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": storage_class,
        },
    }


def runner_set(
    namespace: str | None,
    replicas: int,
    containers: list[JSON],
    *,
    name: str = "rs",
    repository: str = DEFAULT_REPO,
    ephemeral: bool = True,
    **spec: Any,
) -> JSON:
    """A RunnerSet ``name`` of ``replicas`` runners for ``repository``, its pods labelled
    ``app: name`` with ``containers``. ``spec``: further RunnerSet fields (``labels``,
    ``dockerEnabled``, ``volumeClaimTemplates``). No ``namespace``: none in the metadata,
    for a body posted to a namespaced URL."""
    metadata: JSON = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": lc.API_VERSION,
        "kind": lc.KIND_RUNNER_SET,
        "metadata": metadata,
        "spec": {
            "repository": repository,
            "ephemeral": ephemeral,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "serviceName": name,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers},
            },
            **spec,
        },
    }


def runner_deployment(
    namespace: str,
    *,
    name: str = "rd",
    repository: str = DEFAULT_REPO,
    labels: tuple[str, ...] = ("linux",),
    replicas: int | None = None,
) -> JSON:
    """A RunnerDeployment ``name`` of runners for ``repository`` with ``labels``;
    ``replicas`` unset leaves the field out (the CRD's default, 1)."""
    spec: JSON = {"template": {"spec": {"repository": repository, "labels": list(labels)}}}
    if replicas is not None:
        spec = {"replicas": replicas, **spec}
    return {
        "apiVersion": lc.API_VERSION,
        "kind": lc.KIND_RUNNER_DEPLOYMENT,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def horizontal_runner_autoscaler(
    namespace: str,
    max_replicas: int,
    *,
    name: str = "hra",
    target: str = "rd",
    duration: str | None = None,
) -> JSON:
    """An HRA that scales the RunnerDeployment ``target`` from 0 to ``max_replicas`` on
    ``workflow_job`` webhooks, each reservation lasting ``duration`` (unset: the default)."""
    trigger: JSON = {"githubEvent": {"workflowJob": {}}}
    if duration is not None:
        trigger["duration"] = duration
    return {
        "apiVersion": lc.API_VERSION,
        "kind": lc.KIND_HORIZONTAL_RUNNER_AUTOSCALER,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"kind": "RunnerDeployment", "name": target},
            "minReplicas": 0,
            "maxReplicas": max_replicas,
            "scaleUpTriggers": [trigger],
        },
    }
