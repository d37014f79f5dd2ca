"""The scale set chart's per-object metadata (resourceMeta) and ARC 0.14's experimental
values layout (scaleset.*, auth.*, secretResolution, resource.<object>.metadata).

resourceMeta keys for the chart's own objects land on those objects; the others are the
AutoscalingRunnerSet's ``*Metadata`` fields, which the controller applies (see
tests/integration/controllers/test_autoscaling_runner_set_metadata.py). The experimental
layout must render exactly what the same settings in the classic layout render, or fail
with a message naming the value to use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cases import CONTROLLER_SA

from testworld.helm import SCALE_SET_CHART, Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

JSON = dict[str, Any]
NAMESPACE = "arc-runners"
URL = "https://github.com/octo-org"
VALUES_HASH = "actions.github.com/values-hash"

#: resourceMeta key -> (kind, name) of the chart object it is for (release "arc").
CHART_OBJECTS = {
    "autoscalingRunnerSet": ("AutoscalingRunnerSet", "arc"),
    "githubConfigSecret": ("Secret", "arc-gha-rs-github-secret"),
    "managerRole": ("Role", "arc-gha-rs-manager"),
    "managerRoleBinding": ("RoleBinding", "arc-gha-rs-manager"),
    "kubernetesModeRole": ("Role", "arc-gha-rs-kube-mode"),
    "kubernetesModeRoleBinding": ("RoleBinding", "arc-gha-rs-kube-mode"),
    "kubernetesModeServiceAccount": ("ServiceAccount", "arc-gha-rs-kube-mode"),
}
#: resourceMeta key -> the AutoscalingRunnerSet spec field it fills.
SPEC_FIELDS = {
    "autoscalingListener": "autoscalingListener",
    "listenerServiceAccount": "listenerServiceAccountMetadata",
    "listenerRole": "listenerRoleMetadata",
    "listenerRoleBinding": "listenerRoleBindingMetadata",
    "listenerConfigSecret": "listenerConfigSecretMetadata",
    "ephemeralRunnerSet": "ephemeralRunnerSetMetadata",
    "ephemeralRunner": "ephemeralRunnerMetadata",
    "ephemeralRunnerConfigSecret": "ephemeralRunnerConfigSecretMetadata",
}
KUBERNETES_MODE: JSON = {
    "type": "kubernetes",
    "kubernetesModeWorkVolumeClaim": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "standard",
        "resources": {"requests": {"storage": "1Gi"}},
    },
}
APP_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIfake\n-----END RSA PRIVATE KEY-----\n"
VAULT = {
    "url": "https://gharc.vault.azure.net",
    "tenant_id": "tenant-1",
    "client_id": "client-1",
    "certificate_path": "/etc/vault/cert.pem",
}
RULE = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}


def _meta(key: str) -> JSON:
    return {"labels": {f"meta.example.com/{key}": "yes"}, "annotations": {"note": key}}


def _render(helm: Helm, values: JSON) -> list[JSON]:
    result = helm.template(
        SCALE_SET_CHART,
        namespace=NAMESPACE,
        values={"controllerServiceAccount": CONTROLLER_SA, **values},
    )
    assert result.ok, result.stderr
    return result.documents()


def _fails(helm: Helm, values: JSON) -> str:
    result = helm.template(
        SCALE_SET_CHART,
        namespace=NAMESPACE,
        values={"controllerServiceAccount": CONTROLLER_SA, **values},
    )
    assert not result.ok, f"rendered although {values} is refused"
    return result.stderr


def _find(docs: list[JSON], kind: str, name: str) -> JSON:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, got {len(found)}"
    return found[0]


def _ars(docs: list[JSON]) -> JSON:
    return next(d for d in docs if d["kind"] == "AutoscalingRunnerSet")


def _without_values_hash(docs: list[JSON]) -> list[JSON]:
    """The documents minus the hash of the values text (the layouts differ in text only)."""
    for doc in docs:
        (doc["metadata"].get("annotations") or {}).pop(VALUES_HASH, None)
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


# ---- resourceMeta (ARC's classic layout) ------------------------------------------------


def test_resource_meta_lands_on_each_chart_object_and_spec_field(helm: Helm) -> None:
    keys = [*CHART_OBJECTS, "noPermissionServiceAccount", *SPEC_FIELDS]
    meta = {key: _meta(key) for key in keys}
    base = {"githubConfigUrl": URL, "githubConfigSecret": {"github_token": "ghp_x"}}
    kube_docs = _render(helm, {**base, "resourceMeta": meta, "containerMode": KUBERNETES_MODE})
    for key, (kind, name) in CHART_OBJECTS.items():
        obj = _find(kube_docs, kind, name)["metadata"]
        assert obj["labels"][f"meta.example.com/{key}"] == "yes", (key, obj)
        assert obj["annotations"]["note"] == key, (key, obj)
        others = {k for k in obj["labels"] if k.startswith("meta.example.com/")}
        assert others == {f"meta.example.com/{key}"}, f"{kind} {name} has {others}"
    spec = _ars(kube_docs)["spec"]
    for key, field in SPEC_FIELDS.items():
        assert spec[field] == _meta(key), field
    # The no-permission ServiceAccount exists without a container mode.
    plain = _render(helm, {**base, "resourceMeta": meta})
    sa = _find(plain, "ServiceAccount", "arc-gha-rs-no-permission")["metadata"]
    assert sa["labels"]["meta.example.com/noPermissionServiceAccount"] == "yes"
    assert sa["annotations"]["note"] == "noPermissionServiceAccount"


def test_unset_resource_meta_leaves_spec_fields_out(helm: Helm) -> None:
    docs = _render(helm, {"githubConfigUrl": URL, "githubConfigSecret": "gh"})
    spec = _ars(docs)["spec"]
    assert not set(SPEC_FIELDS.values()) & set(spec)


# ---- ARC 0.14's experimental layout: accepted, rendering what the classic one does -------


EQUIVALENT: dict[str, tuple[JSON, JSON]] = {
    "scaleset and a token": (
        {
            "scaleset": {
                "name": "linux",
                "runnerGroup": "builders",
                "labels": ["x64", "gpu"],
                "minRunners": 0,
                "maxRunners": 7,
            },
            "auth": {"url": URL, "githubToken": "ghp_x"},
        },
        {
            "runnerScaleSetName": "linux",
            "runnerGroup": "builders",
            "scaleSetLabels": ["x64", "gpu"],
            "minRunners": 0,
            "maxRunners": 7,
            "githubConfigUrl": URL,
            "githubConfigSecret": {"github_token": "ghp_x"},
        },
    ),
    "the default group and a named Secret": (
        {"scaleset": {"runnerGroup": "default"}, "auth": {"url": URL, "secretName": "gh"}},
        {"githubConfigUrl": URL, "githubConfigSecret": "gh"},
    ),
    "a GitHub App": (
        {
            "auth": {
                "url": URL,
                "app": {"clientId": "Iv23liAbC", "installationId": 654321, "privateKey": APP_KEY},
            }
        },
        {
            "githubConfigUrl": URL,
            "githubConfigSecret": {
                "github_app_id": "Iv23liAbC",
                "github_app_installation_id": "654321",
                "github_app_private_key": APP_KEY,
            },
        },
    ),
    "kubernetes secret resolution": (
        {
            "auth": {"url": URL, "secretName": "gh"},
            "secretResolution": {"type": "kubernetes", "proxy": {"http": {"url": "http://p"}}},
        },
        {"githubConfigUrl": URL, "githubConfigSecret": "gh"},
    ),
    "azure key vault with its proxy": (
        {
            "auth": {"url": URL, "secretName": "gh-config"},
            "secretResolution": {
                "type": "azureKeyVault",
                "azureKeyVault": VAULT,
                "proxy": {"https": {"url": "http://proxy:3128"}},
            },
        },
        {
            "githubConfigUrl": URL,
            "githubConfigSecret": "gh-config",
            "keyVault": {
                "type": "azure_key_vault",
                "azure_key_vault": {**VAULT, "proxy": {"https": {"url": "http://proxy:3128"}}},
            },
        },
    ),
    "resource metadata for every object": (
        {
            "auth": {"url": URL, "secretName": "gh"},
            "resource": {
                "all": {"metadata": {"labels": {"team": "ci"}, "annotations": {"o": "x"}}},
                **{k: {"metadata": _meta(k)} for k in [*CHART_OBJECTS, *SPEC_FIELDS]},
                "managerRole": {"metadata": _meta("managerRole"), "extraRules": []},
                "kubernetesModeRole": {
                    "metadata": _meta("kubernetesModeRole"),
                    "extraRules": [RULE],
                },
                "ephemeralRunner": {"metadata": {"labels": {}, "annotations": {}}},
            },
            "containerMode": KUBERNETES_MODE,
        },
        {
            "githubConfigUrl": URL,
            "githubConfigSecret": "gh",
            "labels": {"team": "ci"},
            "annotations": {"o": "x"},
            "resourceMeta": {
                k: _meta(k) for k in [*CHART_OBJECTS, *SPEC_FIELDS] if k != "ephemeralRunner"
            },
            "containerMode": {**KUBERNETES_MODE, "kubernetesModeAdditionalRoleRules": [RULE]},
        },
    ),
}


@pytest.mark.parametrize("case", list(EQUIVALENT))
def test_experimental_layout_renders_like_the_classic_one(helm: Helm, case: str) -> None:
    experimental, classic = EQUIVALENT[case]
    got = _without_values_hash(_render(helm, experimental))
    want = _without_values_hash(_render(helm, classic))
    assert got == want


def test_experimental_values_reach_the_scale_set(helm: Helm) -> None:
    """Not only equal to the classic rendering: the values are really there."""
    experimental, _ = EQUIVALENT["scaleset and a token"]
    ars = _ars(_render(helm, experimental))
    assert ars["metadata"]["name"] == "linux"
    spec = ars["spec"]
    assert (spec["runnerGroup"], spec["maxRunners"], spec["githubConfigUrl"]) == (
        "builders",
        7,
        URL,
    )
    assert spec["runnerScaleSetLabels"] == ["x64", "gpu"]


# ---- ... or refused with a message naming the gharc value --------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"auth": {"url": URL, "secretName": "gh"}, "githubConfigUrl": "https://github.com/x"},
            "auth.url and githubConfigUrl are both set: gharc reads githubConfigUrl",
        ),
        (
            {"auth": {"url": URL, "secretName": "gh", "githubToken": "ghp_x"}},
            "auth.secretName and auth.githubToken are all set",
        ),
        (
            {"auth": {"url": URL, "app": {"clientId": "1"}}},
            "auth.app needs clientId, installationId and privateKey (gharc: githubConfigSecret",
        ),
        (
            {"auth": {"url": URL, "secretName": "a"}, "githubConfigSecret": "b"},
            "auth.secretName and githubConfigSecret are both set",
        ),
        (
            {"auth": {"url": URL, "token": "x"}, "githubConfigSecret": "b"},
            "auth.token is not a value of ARC's experimental chart that gharc knows",
        ),
        (
            {"scaleset": {"name": "a", "size": 3}, "githubConfigUrl": URL},
            "scaleset.size is not a value",
        ),
        (
            {"scaleset": {"maxRunners": 3}, "maxRunners": 5, "githubConfigUrl": URL},
            "scaleset.maxRunners and maxRunners are both set: gharc reads maxRunners",
        ),
        (
            {"secretResolution": {"type": "hashicorpVault"}, "githubConfigUrl": URL},
            'secretResolution.type "hashicorpVault" is not supported',
        ),
        (
            {
                "secretResolution": {"type": "azureKeyVault", "azureKeyVault": VAULT},
                "keyVault": {"type": "azure_key_vault", "azure_key_vault": VAULT},
                "githubConfigUrl": URL,
                "githubConfigSecret": "gh",
            },
            "secretResolution and keyVault are both set: gharc reads keyVault",
        ),
        (
            {"resource": {"managerRole": {"extraRules": [RULE]}}, "githubConfigUrl": URL},
            "resource.managerRole.extraRules is not supported",
        ),
        (
            {
                "resource": {"ephemeralRunner": {"metadata": _meta("a")}},
                "resourceMeta": {"ephemeralRunner": _meta("b")},
                "githubConfigUrl": URL,
            },
            "resource.ephemeralRunner.metadata and resourceMeta.ephemeralRunner are both set",
        ),
        (
            {"resource": {"runnerPod": {"metadata": _meta("a")}}, "githubConfigUrl": URL},
            "resource.runnerPod is not a value",
        ),
        (
            {"resource": {"ephemeralRunner": {"spec": {}}}, "githubConfigUrl": URL},
            "resource.ephemeralRunner.spec is not a value",
        ),
        (
            {
                "resource": {"kubernetesModeRole": {"extraRules": [RULE]}},
                "containerMode": {**KUBERNETES_MODE, "kubernetesModeAdditionalRoleRules": [{}]},
                "githubConfigUrl": URL,
            },
            "containerMode.kubernetesModeAdditionalRoleRules are both set",
        ),
        (
            {"runner": {"container": {"image": "my/runner:1"}}, "githubConfigUrl": URL},
            "runner.* is a value of ARC's experimental chart that gharc does not map: give "
            "the runner pod as template",
        ),
        (
            {"listener": {"scaler": {"qps": 50}}, "githubConfigUrl": URL},
            "give listener.podTemplate as listenerTemplate",
        ),
    ],
)
def test_experimental_values_gharc_cannot_take_fail_readably(
    helm: Helm, values: JSON, message: str
) -> None:
    assert message in _fails(helm, values)


def test_every_template_moves_the_experimental_values_first() -> None:
    """A template that read .Values before the move would miss the experimental layout."""
    include = '{{- include "gharc-scale-set.experimentalValues" . '
    templates = [p for p in (SCALE_SET_CHART / "templates").iterdir() if not p.name.startswith("_")]
    assert templates
    late = [p.name for p in templates if not Path(p).read_text().startswith(include)]
    assert not late, f"templates not starting with the experimental values move: {late}"
