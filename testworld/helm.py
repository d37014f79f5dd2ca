"""Run the helm binary that ``scripts/testbins helm`` builds, for the chart tests.

Chart tests need a real helm (templates are Go templates; nothing else renders them the
same way), built from the Go module proxy like the control plane. :func:`find_helm` says
why helm is missing instead of returning ``None``, so a test skips with a reason a human
can act on; ``GHARC_REQUIRE_HELM=1`` turns that skip into a failure for CI, where a chart
test that silently skips is a chart test that does not exist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ROOT / "charts"
CONTROLLER_CHART = CHARTS / "gharc-controller"
SCALE_SET_CHART = CHARTS / "gharc-scale-set"
LEGACY_CHART = CHARTS / "gharc-legacy"

#: The Kubernetes version `helm template` renders for (the dind native sidecar needs >= 1.29).
#: Fixed, so golden files do not depend on the helm build's default.
KUBE_VERSION = "1.36.0"


class HelmUnavailable(RuntimeError):
    """helm could not be found or built here; the message says why."""


def find_helm(build_timeout: float = 900.0) -> str:
    """Path of a helm binary: ``$GHARC_HELM``, else ``scripts/testbins helm`` (builds once)."""
    given = os.environ.get("GHARC_HELM", "").strip()
    if given:
        if os.access(given, os.X_OK):
            return given
        raise HelmUnavailable(f"GHARC_HELM={given} is not an executable file")
    if shutil.which("go") is None:
        raise HelmUnavailable("no `go` on PATH, so scripts/testbins cannot build helm")
    try:
        proc = subprocess.run(
            [str(ROOT / "scripts" / "testbins"), "helm"],
            capture_output=True,
            text=True,
            timeout=build_timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise HelmUnavailable(f"building helm took longer than {build_timeout:.0f} s") from err
    path = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not path or not os.access(path, os.X_OK):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise HelmUnavailable(f"scripts/testbins helm failed (exit {proc.returncode}):\n{tail}")
    return path


@dataclass
class HelmResult:
    """One helm run: exit code and output, with the failure message helm printed."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def documents(self) -> list[dict[str, Any]]:
        """The rendered manifests, empty documents dropped."""
        return [d for d in yaml.safe_load_all(self.stdout) if d]


@dataclass
class Helm:
    """A helm binary with an isolated home, so a developer's repos and plugins never leak in."""

    binary: str
    home: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env.update(
            HELM_CACHE_HOME=str(self.home / "cache"),
            HELM_CONFIG_HOME=str(self.home / "config"),
            HELM_DATA_HOME=str(self.home / "data"),
        )
        env.pop("KUBECONFIG", None)
        return env

    def run(self, args: Sequence[str], timeout: float = 120.0) -> HelmResult:
        proc = subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            check=False,
        )
        return HelmResult(proc.returncode, proc.stdout, proc.stderr)

    def template(
        self,
        chart: Path,
        *,
        release: str = "arc",
        namespace: str = "arc-systems",
        values: Mapping[str, Any] | None = None,
        values_files: Sequence[Path] = (),
        kube_version: str = KUBE_VERSION,
    ) -> HelmResult:
        """``helm template``; ``values`` are written to a file (no --set quoting pitfalls)."""
        args = ["template", release, str(chart), "--namespace", namespace]
        args += ["--kube-version", kube_version]
        for f in values_files:
            args += ["--values", str(f)]
        if values is not None:
            args += ["--values", str(self._values_file(values))]
        return self.run(args)

    def _values_file(self, values: Mapping[str, Any]) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        n = len(list(self.home.glob("values-*.yaml")))
        path = self.home / f"values-{n}.yaml"
        path.write_text(yaml.safe_dump(dict(values), sort_keys=False), encoding="utf-8")
        return path

    def install(
        self,
        release: str,
        chart: Path,
        *,
        namespace: str,
        kubeconfig: str,
        values: Mapping[str, Any] | None = None,
        timeout: float = 180.0,
    ) -> HelmResult:
        """``helm install --kubeconfig`` (no --wait: there is no kubelet to run pods)."""
        args = ["install", release, str(chart), "--namespace", namespace]
        args += ["--kubeconfig", kubeconfig]
        if values is not None:
            args += ["--values", str(self._values_file(values))]
        return self.run(args, timeout=timeout)


def helm_or_skip(home: Path) -> Helm:
    """The session's :class:`Helm`, or a pytest skip (a failure under GHARC_REQUIRE_HELM=1)."""
    import pytest

    try:
        return Helm(find_helm(), home)
    except HelmUnavailable as err:
        if os.environ.get("GHARC_REQUIRE_HELM", "") not in ("", "0"):
            pytest.fail(f"helm is required (GHARC_REQUIRE_HELM) but unavailable: {err}")
        pytest.skip(f"chart tests need helm, which could not be built here: {err}")
