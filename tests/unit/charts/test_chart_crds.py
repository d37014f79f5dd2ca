"""The controller chart ships exactly the CRDs `gharc crds --group scaleset` prints.

Helm installs crds/ verbatim and never upgrades them, so a stale copy would install an old
schema that drops new fields. Regenerate with ``scripts/chart-crds``.
"""

from __future__ import annotations

import subprocess
import sys

from gharc.api import crds
from testworld.helm import CONTROLLER_CHART

CHART_CRDS = CONTROLLER_CHART / "crds"


def test_chart_crds_equal_gharc_crds_output() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "gharc", "crds", "--group", "scaleset"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = sorted(CHART_CRDS.glob("*.yaml"))
    shipped = "".join(f.read_text(encoding="utf-8") for f in files)
    assert printed, "gharc crds --group scaleset printed nothing"
    assert shipped == printed, "charts/gharc-controller/crds is stale: run scripts/chart-crds"


def test_one_file_per_crd_named_like_the_package() -> None:
    assert [f.name for f in sorted(CHART_CRDS.glob("*.yaml"))] == crds.manifest_files(
        crds.GROUPS["scaleset"]
    )
