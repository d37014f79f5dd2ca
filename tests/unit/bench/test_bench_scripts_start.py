"""Every benchmark script still starts: benchmarks are not run by the suite, so an import
that moved (as ``HORIZONTAL_RUNNER_AUTOSCALERS`` did to gharc.api.resources) would
otherwise break one unnoticed until somebody needs its numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_the_bench_folder_has_scripts() -> None:
    assert len(SCRIPTS) >= 5, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_bench_script_answers_help(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower(), done.stdout[:500]
