"""The real-node tier: a real kubelet, containerd, scheduler and controllers, real pods.

One :class:`~testworld.realnode.RealCluster` serves the whole run (about 10 s to bring
up once its binaries and images are cached). When the host cannot run containers, or the
binaries or images cannot be built, every test here skips and says why; with
``GHARC_REQUIRE_REAL_NODE=1`` (as CI sets where it can run them) it fails instead.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from gharc.kube.client import KubeClient
from testworld.helm import Helm, helm_or_skip

log = logging.getLogger("gharc.tests.realnode")

REPO_ROOT = Path(__file__).resolve().parents[2]


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GHARC_REQUIRE_REAL_NODE", "") not in ("", "0"):
        pytest.fail(f"a real node is required (GHARC_REQUIRE_REAL_NODE) but: {reason}")
    pytest.skip(f"the real-node tests cannot run here: {reason}")


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[object]:
    """A real single-node cluster with gharc's CRDs and the test images loaded."""
    from testworld.realnode import RealCluster, RealNodeError, unavailable_reason
    from testworld.realnode_image import ImageBuildError, build_images

    reason = unavailable_reason()
    if reason:
        _unavailable(reason)
    built = subprocess.run(
        [str(REPO_ROOT / "scripts" / "testbins"), "node"], capture_output=True, text=True
    )
    if built.returncode != 0:
        _unavailable(f"scripts/testbins node failed:\n{built.stderr[-2000:]}")
    os.environ["KUBEBUILDER_ASSETS"] = built.stdout.strip().splitlines()[-1]
    try:
        images = build_images()
    except (ImageBuildError, OSError, subprocess.CalledProcessError) as err:
        _unavailable(f"the images could not be built: {err}")
    from gharc.api import crds

    rc = RealCluster(crds=list(crds.load("all")), images=images)
    try:
        rc.start()
    except (RealNodeError, OSError, subprocess.CalledProcessError) as err:
        _unavailable(f"the node did not come up: {err}")
    log.warning(
        "real node up in %.1f s (images loaded in %.1f s)",
        rc.startup_seconds,
        rc.image_load_seconds,
    )
    try:
        yield rc
    finally:
        rc.stop()


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture
async def kube(real_cluster: object) -> AsyncIterator[KubeClient]:
    """A client of the real cluster for the test's event loop."""
    client = await KubeClient.from_config(kubeconfig=real_cluster.kubeconfig_path)  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await client.close()
