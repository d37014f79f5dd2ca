"""`helm template` golden files for the main value combinations of both charts.

A golden file is the exact output of one render; a diff is a change in what users get.
Regenerate after an intended change with::

    GHARC_UPDATE_GOLDEN=1 ./scripts/test tests/unit/charts/test_chart_golden.py

and read the diff of tests/unit/charts/golden/ before committing it.
"""

from __future__ import annotations

import difflib
import os

import pytest
from cases import CASES, GOLDEN

from testworld.helm import Helm

pytestmark = pytest.mark.timeout(900)  # the first run may build helm


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_golden(helm: Helm, case: str) -> None:
    chart, namespace, values = CASES[case]
    result = helm.template(chart, namespace=namespace, values=values)
    assert result.ok, result.stderr
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("GHARC_UPDATE_GOLDEN"):
        path.write_text(result.stdout, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with GHARC_UPDATE_GOLDEN=1 to write it"
    want = path.read_text(encoding="utf-8")
    if result.stdout != want:
        diff = "".join(
            difflib.unified_diff(
                want.splitlines(keepends=True),
                result.stdout.splitlines(keepends=True),
                f"golden/{case}.yaml",
                "helm template",
            )
        )
        pytest.fail(f"render differs from golden/{case}.yaml (GHARC_UPDATE_GOLDEN=1):\n{diff}")


def test_every_golden_file_is_a_case() -> None:
    """A stale golden file would silently test nothing."""
    assert sorted(p.stem for p in GOLDEN.glob("*.yaml")) == sorted(CASES)
