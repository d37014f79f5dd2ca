"""The value combinations the chart tests render, shared by the golden and semantic tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testworld.helm import CONTROLLER_CHART, SCALE_SET_CHART

GOLDEN = Path(__file__).parent / "golden"

#: The controller the scale set cases bind their manager Role to (`helm template` cannot
#: look the controller Deployment up).
CONTROLLER_SA = {"name": "arc-gha-rs-controller", "namespace": "arc-systems"}

_APP_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIfake\n-----END RSA PRIVATE KEY-----\n"


def _scale_set(**extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/octo-org",
        "githubConfigSecret": {"github_token": "ghp_golden000000000000000000000000000000"},
        "controllerServiceAccount": CONTROLLER_SA,
    }
    values.update(extra)
    return values


#: name -> (chart, release namespace, values)
CASES: dict[str, tuple[Path, str, dict[str, Any]]] = {
    "controller-default": (CONTROLLER_CHART, "arc-systems", {}),
    "controller-watch-single-namespace": (
        CONTROLLER_CHART,
        "arc-systems",
        {"flags": {"watchSingleNamespace": "arc-runners"}},
    ),
    "controller-replicas-2": (
        CONTROLLER_CHART,
        "arc-systems",
        {
            "replicaCount": 2,
            "imagePullSecrets": [{"name": "regcred"}],
            "flags": {"excludeLabelPropagationPrefixes": ["argocd.argoproj.io/"]},
        },
    ),
    "scale-set-pat": (
        SCALE_SET_CHART,
        "arc-runners",
        _scale_set(minRunners=1, maxRunners=10, runnerGroup="linux", scaleSetLabels=["x64"]),
    ),
    "scale-set-app": (
        SCALE_SET_CHART,
        "arc-runners",
        _scale_set(
            githubConfigSecret={
                "github_app_id": "123456",
                "github_app_installation_id": "654321",
                "github_app_private_key": _APP_KEY,
            }
        ),
    ),
    "scale-set-dind": (SCALE_SET_CHART, "arc-runners", _scale_set(containerMode={"type": "dind"})),
    "scale-set-kubernetes": (
        SCALE_SET_CHART,
        "arc-runners",
        _scale_set(
            containerMode={
                "type": "kubernetes",
                "kubernetesModeWorkVolumeClaim": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "standard",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ),
    ),
    "scale-set-proxy-tls": (
        SCALE_SET_CHART,
        "arc-runners",
        _scale_set(
            githubConfigSecret="pre-defined-secret",
            proxy={
                "http": {"url": "http://proxy.internal:3128", "credentialSecretRef": "proxy-auth"},
                "https": {"url": "http://proxy.internal:3128", "credentialSecretRef": "proxy-auth"},
                "noProxy": ["ghes.internal", "10.0.0.0/8"],
            },
            githubServerTLS={
                "certificateFrom": {"configMapKeyRef": {"name": "ghes-ca", "key": "ca.crt"}},
                "runnerMountPath": "/usr/local/share/ca-certificates/",
            },
        ),
    ),
}
