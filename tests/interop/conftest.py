"""The interop tier: ARC's own listener against gharc's fake GitHub and gharc's controller.

``scripts/arc-listener`` builds ARC's listener from the Go module proxy once and caches it
(as ``scripts/testbins`` does the API server). When it cannot be built or run here, the
tests skip saying why, and fail instead under ``GHARC_REQUIRE_ARC_LISTENER=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "interop: runs a program of ARC's against gharc")


def _unavailable(reason: str) -> None:
    if os.environ.get("GHARC_REQUIRE_ARC_LISTENER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def arc_listener() -> tuple[str, str]:
    """``(kind, path)`` of ARC's listener binary (see scripts/arc-listener)."""
    if os.environ.get("GHARC_ARC_LISTENER"):
        kind, _, path = os.environ["GHARC_ARC_LISTENER"].partition(":")
        return kind, path
    if shutil.which("go") is None:
        _unavailable("no go toolchain to build ARC's listener")
    done = subprocess.run(
        [str(ROOT / "scripts" / "arc-listener")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        _unavailable(f"ARC's listener cannot be built: {done.stderr.strip()[-2000:]}")
    kind, path = done.stdout.split()[-2:]
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        _unavailable("unshare -m is not permitted: ARC's listener needs its in-cluster files")
    return kind, path
