"""The controller imports kubernetes_asyncio's transport, not its generated models."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import gharc.kube.client, gharc.kube.config
models = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")]
apis = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.api.")]
print(len(models), len(apis))
from kubernetes_asyncio import client, watch
assert client.CoreV1Api and client.V1Pod and watch.Watch  # still there when asked for
"""


def test_importing_the_client_loads_no_models() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["0", "0"]
