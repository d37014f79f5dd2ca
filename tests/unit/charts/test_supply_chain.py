"""What gets installed is what was reviewed: locks with hashes, real lower bounds, an SBOM.

The image, ``scripts/bootstrap`` (and so ``./scripts/test`` and CI) install from the lock
files with ``--require-hashes``; ``scripts/test-min-deps`` runs the unit tests at the lower
bounds in ``constraints-min.txt``. These tests keep those files and pyproject.toml in step.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from testworld.helm import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
RUNTIME = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
EXTRAS = [
    Requirement(r)
    for extra in ("dev", "demo", "sim")
    for r in PYPROJECT["project"]["optional-dependencies"][extra]
]


def lock_entries(path: Path) -> dict[str, tuple[str, list[str]]]:
    """``{name: (version, hashes)}`` of a hash-pinned lock file."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import sbom
    finally:
        sys.path.pop(0)
    text = path.read_text(encoding="utf-8")
    return {canonicalize_name(n): (v, h) for n, v, h in sbom.locked(text)}


RUNTIME_LOCK = lock_entries(ROOT / "requirements.lock")
DEV_LOCK = lock_entries(ROOT / "requirements-dev.lock")


@pytest.mark.parametrize(("lock", "reqs"), [(RUNTIME_LOCK, RUNTIME), (DEV_LOCK, RUNTIME + EXTRAS)])
def test_locks_pin_every_dependency_within_pyproject_bounds_with_hashes(
    lock: dict[str, tuple[str, list[str]]], reqs: list[Requirement]
) -> None:
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in lock, f"{name} is not locked: run scripts/lock"
        version, _ = lock[name]
        assert req.specifier.contains(version, prereleases=True), (name, version, req)
    for name, (_, hashes) in lock.items():
        assert hashes, f"{name} has no hash"


def test_both_locks_agree_on_shared_versions() -> None:
    for name, (version, _) in RUNTIME_LOCK.items():
        assert DEV_LOCK[name][0] == version, name


def _lower_bounds() -> dict[str, str]:
    bounds = {}
    for req in RUNTIME + EXTRAS:
        for spec in req.specifier:
            if spec.operator == ">=":
                bounds[canonicalize_name(req.name)] = spec.version
    return bounds


def test_constraints_min_matches_pyproject_lower_bounds() -> None:
    pinned = {}
    for line in (ROOT / "constraints-min.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pinned[canonicalize_name(name)] = version
    # The tools that only lint (ruff, mypy) and the demo's plotting are not tested low.
    wanted = {k: v for k, v in _lower_bounds().items() if k not in {"ruff", "mypy", "matplotlib"}}
    assert set(pinned) == set(wanted), "constraints-min.txt names the bounded packages"
    for name, bound in wanted.items():
        assert Version(pinned[name]) == Version(bound), (name, pinned[name], bound)


def test_hishel_lower_bound_is_the_api_the_cache_uses() -> None:
    """gharc.github.cache passes ``rfc=`` to the transport and ``default_ttl`` to the
    storage: hishel 1.x has neither, so 1.x must not satisfy the bound."""
    [hishel] = [r for r in RUNTIME if canonicalize_name(r.name) == "hishel"]
    assert not hishel.specifier.contains("1.4.0")
    assert hishel.specifier.contains("2.0.0")


def test_the_sbom_lists_every_locked_package_with_its_hashes() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sbom.py"), str(ROOT / "requirements.lock")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    bom = json.loads(proc.stdout)
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.5"
    listed = {c["name"]: c for c in bom["components"]}
    assert set(listed) == set(RUNTIME_LOCK)
    for name, (version, hashes) in RUNTIME_LOCK.items():
        assert listed[name]["version"] == version
        assert listed[name]["purl"] == f"pkg:pypi/{name}@{version}"
        assert {h["content"] for h in listed[name]["hashes"]} == set(hashes)


def test_bootstrap_installs_only_the_lock_hash_checked() -> None:
    script = (ROOT / "scripts" / "bootstrap").read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^\n>]+)", script)
    assert 'lock="$root/requirements-dev.lock"' in script
    assert any("--require-hashes" in a and '-r "$lock"' in a for a in installs), installs
    assert all("--no-deps" in a for a in installs), installs
