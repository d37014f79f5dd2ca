"""The Dockerfile cannot be built here (no container runtime), so check what it promises:
a pinned base, a non-root user the charts agree with, and entry points that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testworld.helm import CONTROLLER_CHART, ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _entrypoints() -> list[str]:
    line = re.search(r"^# entrypoints: (.+)$", DOCKERFILE, re.MULTILINE)
    assert line, "the Dockerfile must name its entry points in an '# entrypoints:' line"
    return [e.strip().removeprefix("gharc ").strip() for e in line.group(1).split(",")]


def test_base_image_is_pinned_python_311_slim() -> None:
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert base, "the base image is a build argument with a default"
    # A tag names whatever was pushed last under it; the digest names one image.
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+@sha256:[0-9a-f]{64}", base.group(1))
    assert DOCKERFILE.count("FROM ${PYTHON_IMAGE}") == 2, "multi-stage, same pinned base"
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert set(stages) == {"${PYTHON_IMAGE}", "runtime"}, stages


def test_the_default_target_leaves_the_test_world_out() -> None:
    """``docker build .`` gives the product: the package it installs has no test world in
    it, and only the ``sim`` stage (the test world's runner image) adds ``testworld``."""
    last = DOCKERFILE[DOCKERFILE.rindex("\nFROM ") :]
    assert "COPY --from=build /opt/gharc /opt/gharc" in last
    assert "testworld" not in last
    sim = DOCKERFILE[DOCKERFILE.index(" AS sim\n") : DOCKERFILE.rindex("\nFROM ")]
    assert "COPY testworld " in sim
    assert not (ROOT / "gharc" / "sim").exists() and not (ROOT / "gharc" / "testing").exists()
    assert not list((ROOT / "gharc").glob("demo*.py")) + list((ROOT / "gharc").glob("bench*.py"))
    # ... and nothing the product runs imports the test world at start-up.
    probe = (
        "import importlib, pkgutil, sys\n"
        "import gharc.cli\n"
        "for pkg in ('api', 'controllers', 'github', 'kube', 'listener', 'webhook'):\n"
        "    root = importlib.import_module('gharc.' + pkg)\n"
        "    for m in pkgutil.walk_packages(root.__path__, root.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "print([m for m in sys.modules if m.split('.')[0] == 'testworld'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
    assert "--target=sim" in (ROOT / "testworld" / "realnode_image.py").read_text()


def test_runs_as_the_non_root_user_the_chart_expects() -> None:
    user = re.search(r"^USER (\d+):(\d+)$", DOCKERFILE, re.MULTILINE)
    assert user and user.group(1) != "0"
    values = yaml.safe_load((CONTROLLER_CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["podSecurityContext"]["runAsUser"] == int(user.group(1))
    assert values["podSecurityContext"]["runAsGroup"] == int(user.group(2))
    assert 'ENTRYPOINT ["gharc"]' in DOCKERFILE
    assert "PYTHONDONTWRITEBYTECODE=1" in DOCKERFILE, "read-only root filesystem"


def test_only_the_package_is_copied() -> None:
    copies = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.MULTILINE)
    sources = {s for line in copies for s in line.split()}
    assert sources == {
        "pyproject.toml",
        "README.md",
        "gharc",
        "testworld",
        "requirements.lock",
        "scripts/sbom.py",
    }
    for source in sources:
        assert (ROOT / source).exists()
    ignore = Path(ROOT / ".dockerignore").read_text(encoding="utf-8")
    assert {f"!{s}" for s in sources} <= {x.rstrip("/") for x in ignore.split()}


def test_packages_come_from_the_lock_with_hashes_and_an_sbom_is_written() -> None:
    installs = re.findall(r"pip install ([^\n\\&]+)", DOCKERFILE)
    assert installs, "the image installs with pip"
    for args in installs:
        # Either the lock, hash-checked, or the project alone: nothing resolved at build time.
        assert "--no-deps" in args, args
        assert (
            "--require-hashes" in args and "requirements.lock" in args
        ) or args.strip().endswith("."), args
    assert "scripts/sbom.py requirements.lock > /opt/gharc/sbom.cdx.json" in DOCKERFILE


@pytest.mark.parametrize("command", _entrypoints())
def test_entrypoint_exists(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gharc", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower()
