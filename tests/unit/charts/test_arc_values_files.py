"""Every values file of ARC's charts, rendered with gharc's charts, as an ARC user would.

ARC users switch by pointing `helm upgrade` at gharc's chart with the values file they
already have. Each of ARC's files must either render to what it means (the
AutoscalingRunnerSet, the RBAC, the controller's names and flags) or fail with a message
that says what to change, and that message must be documented in docs/configuration.md
(docs/legacy.md for ARC's legacy actions-runner-controller chart, which gharc-legacy takes).
A new file in ARC's folders fails :func:`test_every_arc_values_file_is_classified` until it
is given an expectation here.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from testworld.arcdata import ArcDataMissing, arc_data_dir, values_files
from testworld.helm import CONTROLLER_CHART, LEGACY_CHART, ROOT, SCALE_SET_CHART, Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm

JSON = dict[str, Any]
CONFIGURATION_DOC = ROOT / "docs" / "configuration.md"
LEGACY_DOC = ROOT / "docs" / "legacy.md"

#: Where ARC's default controller release puts its service account; the scale set files
#: that do not name one are rendered against it (`helm template` cannot look it up).
ARC_CONTROLLER_SA = {"name": "arc-gha-rs-controller", "namespace": "arc-systems"}

_NO_RUNNER = 'template.spec.containers must contain a container named "runner"'

#: ARC file (relative to ARC's charts/) -> None when it renders, else (text of the failure,
#: the heading of docs/configuration.md, or docs/legacy.md for the legacy chart, that
#: documents it).
EXPECTED: dict[str, tuple[str, str] | None] = {
    "gha-runner-scale-set-controller/values.yaml": (
        "is ARC's controller image",
        "ARC's controller image",
    ),
    # ARC's defaults: no URL, an empty token; ARC's chart refuses them too.
    "gha-runner-scale-set/values.yaml": (
        "githubConfigSecret needs credentials",
        "githubConfigSecret",
    ),
    "gha-runner-scale-set/tests/values.yaml": None,
    "gha-runner-scale-set/tests/values_dind_extra_init_containers.yaml": None,
    "gha-runner-scale-set/tests/values_dind_extra_volumes.yaml": (_NO_RUNNER, "runner container"),
    "gha-runner-scale-set/tests/values_dind_merge_spec.yaml": None,
    "gha-runner-scale-set/tests/values_extra_containers.yaml": None,
    "gha-runner-scale-set/tests/values_extra_pod_spec.yaml": None,
    "gha-runner-scale-set/tests/values_extra_volumes.yaml": (_NO_RUNNER, "runner container"),
    "gha-runner-scale-set/tests/values_k8s_extra_role_rules.yaml": (_NO_RUNNER, "runner container"),
    "gha-runner-scale-set/tests/values_k8s_extra_volumes.yaml": (_NO_RUNNER, "runner container"),
    "gha-runner-scale-set/tests/values_k8s_merge_spec.yaml": None,
    "gha-runner-scale-set/tests/values_k8s_novolume_custom_volume_mounts.yaml": (
        "template.spec.containers[name=runner].image is required",
        "runner container",
    ),
    "gha-runner-scale-set/tests/values_k8s_novolume_custom_volumes.yaml": None,
    "gha-runner-scale-set/tests/values_listener_template.yaml": None,
    # ARC's legacy chart names ARC's image; without it the file renders
    # (tests/unit/charts/test_legacy_chart.py checks what it renders to).
    "actions-runner-controller/values.yaml": (
        "is ARC's controller image",
        "ARC's controller image",
    ),
}


def _files() -> list[Path]:
    try:
        return values_files()
    except ArcDataMissing:
        return []


def _rel(path: Path) -> str:
    return str(path.relative_to(arc_data_dir() / "charts"))


def _load(path: Path) -> JSON:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    assert isinstance(data, dict)
    return data


def _one(docs: list[JSON], kind: str, name: str | None = None) -> JSON:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['kind'] for d in docs]}"
    return found[0]


def test_every_arc_values_file_is_classified() -> None:
    files = _files()
    if not files:
        pytest.skip("ARC's data files not found (set GHARC_ARC_DATA)")
    assert sorted(_rel(f) for f in files) == sorted(EXPECTED)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p).split("charts/", 1)[-1])
def test_arc_values_file(helm: Helm, path: Path) -> None:
    rel = _rel(path)
    expected = EXPECTED[rel]
    chart = CONTROLLER_CHART if rel.startswith("gha-runner-scale-set-controller/") else None
    doc = CONFIGURATION_DOC
    if rel.startswith("actions-runner-controller/"):
        chart, doc = LEGACY_CHART, LEGACY_DOC
    values = _load(path)
    if chart is None:
        chart = SCALE_SET_CHART
        extra = {} if values.get("controllerServiceAccount") else ARC_CONTROLLER_SA
        result = helm.template(
            chart,
            release="arc-runner-set",
            namespace="arc-runners",
            values_files=[path],
            values={"controllerServiceAccount": extra} if extra else None,
        )
    else:
        result = helm.template(chart, namespace="arc-systems", values_files=[path])
    if isinstance(expected, tuple):
        message, heading = expected
        assert not result.ok, f"{rel} rendered, expected: {message}"
        assert message in result.stderr, result.stderr
        text = doc.read_text(encoding="utf-8")
        assert heading in text, f"{doc.name} does not explain {heading!r}"
        return
    assert result.ok, result.stderr
    _check_scale_set(values, result.documents())


def _check_scale_set(values: JSON, docs: list[JSON]) -> None:
    """The ARS and RBAC say what the values file says."""
    ars = _one(docs, "AutoscalingRunnerSet")
    spec = ars["spec"]
    assert ars["metadata"]["name"] == "arc-runner-set"
    assert spec["githubConfigUrl"] == values["githubConfigUrl"]
    secret = values["githubConfigSecret"]
    if isinstance(secret, str):
        assert spec["githubConfigSecret"] == secret
    else:
        name = spec["githubConfigSecret"]
        assert name == "arc-runner-set-gha-rs-github-secret"
        stored = _one(docs, "Secret", name)
        token = base64.b64decode(stored["data"]["github_token"]).decode()
        assert token == secret["github_token"]
    for key in ("minRunners", "maxRunners"):
        if key in values:
            assert spec[key] == int(values[key])
    assert spec.get("minRunners", 0) == int(values.get("minRunners", 0))
    if "maxRunners" not in values:
        assert "maxRunners" not in spec  # unlimited
    pod = spec["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    for given in values.get("template", {}).get("spec", {}).get("containers", []):
        assert given["name"] in containers
        if "image" in given:
            assert containers[given["name"]]["image"] == given["image"]
    mode = (values.get("containerMode") or {}).get("type", "")
    runner_env = {e["name"]: e for e in containers["runner"].get("env", [])}
    if mode == "dind":
        sidecars = {c["name"] for c in pod.get("initContainers", []) + pod["containers"]}
        assert "dind" in sidecars
        assert "DOCKER_HOST" in runner_env
    if mode.startswith("kubernetes"):
        assert "ACTIONS_RUNNER_CONTAINER_HOOKS" in runner_env
        kube_role = _one(docs, "Role", "arc-runner-set-gha-rs-kube-mode")
        assert any("pods" in r.get("resources", []) for r in kube_role["rules"])
    if "listenerTemplate" in values:
        given = values["listenerTemplate"]["spec"]
        rendered = spec["listenerTemplate"]["spec"]
        assert [c["name"] for c in rendered["containers"]] == [
            c["name"] for c in given["containers"]
        ]
    # The manager Role is bound to the controller's service account the file names.
    sa = values.get("controllerServiceAccount") or ARC_CONTROLLER_SA
    binding = _one(docs, "RoleBinding", "arc-runner-set-gha-rs-manager")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]
    assert binding["roleRef"]["name"] == "arc-runner-set-gha-rs-manager"


def test_arc_controller_values_without_arcs_image_keep_arcs_names(helm: Helm) -> None:
    """What the failure message says to do works, and keeps ARC's names and flags."""
    try:
        path = arc_data_dir() / "charts" / "gha-runner-scale-set-controller" / "values.yaml"
    except ArcDataMissing as err:
        pytest.skip(str(err))
    values = _load(path)
    values["image"] = {k: v for k, v in values["image"].items() if k != "repository"}
    result = helm.template(CONTROLLER_CHART, namespace="arc-systems", values=values)
    assert result.ok, result.stderr
    docs = result.documents()
    sa = _one(docs, "ServiceAccount")
    assert sa["metadata"]["name"] == "arc-gha-rs-controller"
    deploy = _one(docs, "Deployment")
    assert deploy["metadata"]["name"] == "arc-gha-rs-controller"
    assert deploy["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "gha-rs-controller",
        "app.kubernetes.io/namespace": "arc-systems",
        "app.kubernetes.io/instance": "arc",
    }
    labels = deploy["metadata"]["labels"]
    assert labels["actions.github.com/controller-service-account-name"] == "arc-gha-rs-controller"
    assert labels["app.kubernetes.io/part-of"] == "gha-rs-controller"
    manager = next(c for c in deploy["spec"]["template"]["spec"]["containers"])
    assert manager["image"].startswith("ghcr.io/gharc/gharc:")
    assert "--runner-max-concurrent-reconciles=2" in manager["args"]
    binding = _one(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["name"] == "arc-gha-rs-controller"


def test_legacy_values_given_to_the_scale_set_chart_are_refused_clearly(helm: Helm) -> None:
    """ARC's legacy chart values given to the scale set controller chart say so."""
    try:
        path = arc_data_dir() / "charts" / "actions-runner-controller" / "values.yaml"
    except ArcDataMissing as err:
        pytest.skip(str(err))
    result = helm.template(CONTROLLER_CHART, namespace="arc-systems", values_files=[path])
    assert not result.ok
    assert "is ARC's controller image" in result.stderr


_SCALE_SET_BASE: JSON = {
    "githubConfigUrl": "https://github.com/octo-org",
    "githubConfigSecret": {"github_token": "ghp_x"},
    "controllerServiceAccount": ARC_CONTROLLER_SA,
}


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        ({"minRunners": "2", "maxRunners": "5"}, {"minRunners": 2, "maxRunners": 5}),
        ({"minRunners": 1, "maxRunners": None}, {"minRunners": 1}),
        # As in ARC: no minRunners value, no minRunners in the spec.
        ({"containerMode": {"type": "none"}}, {}),
    ],
    ids=["quoted-counts", "null-max-is-unlimited", "container-mode-none"],
)
def test_arc_value_shapes_are_accepted(helm: Helm, extra: JSON, expect: JSON) -> None:
    result = helm.template(
        SCALE_SET_CHART,
        release="arc-runner-set",
        namespace="arc-runners",
        values={**_SCALE_SET_BASE, **extra},
    )
    assert result.ok, result.stderr
    spec = _one(result.documents(), "AutoscalingRunnerSet")["spec"]
    assert {k: spec[k] for k in ("minRunners", "maxRunners") if k in spec} == expect


@pytest.mark.parametrize(
    ("chart", "extra", "message"),
    [
        (SCALE_SET_CHART, {"controller": {"replicaCount": 2}}, "controller.* is a value of"),
        (SCALE_SET_CHART, {"minRunners": "two"}, "minRunners"),
        (CONTROLLER_CHART, {"controller": {"manager": {}}}, "controller.* is the layout"),
        (CONTROLLER_CHART, {"pprof": {"addr": ":6060"}}, "pprof.addr"),
        (
            CONTROLLER_CHART,
            {"flags": {"rateLimiter": {"name": "typed_rate_limiter"}}},
            "rateLimiter",
        ),
        (
            CONTROLLER_CHART,
            {"image": {"repository": "ghcr.io/actions/gha-runner-scale-set-controller"}},
            "is ARC's controller image",
        ),
    ],
    ids=[
        "scale-set-controller-keys",
        "non-numeric-count",
        "experimental-controller-keys",
        "pprof",
        "rate-limiter",
        "arc-image",
    ],
)
def test_arc_values_gharc_cannot_honour_are_refused(
    helm: Helm, chart: Path, extra: JSON, message: str
) -> None:
    values = {**_SCALE_SET_BASE, **extra} if chart == SCALE_SET_CHART else extra
    result = helm.template(chart, release="arc-runner-set", namespace="arc-runners", values=values)
    assert not result.ok
    assert message in result.stderr, result.stderr
