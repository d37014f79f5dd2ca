"""A pod-mode listener with a PAT loads only what it needs: no PyJWT, no cryptography (only
GitHub App credentials sign a JWT) and not httpx's command-line client (click, rich,
pygments). Each is several MiB in every listener process."""

from __future__ import annotations

import subprocess
import sys

# What ``gharc listener`` imports (the CLI, then the listener), plus the PAT paths it runs:
# credentials and the admin token's expiry.
PROBE = """
import sys
import gharc.cli, gharc.listener.__main__, gharc.listener.app
from gharc.github.actions import _jwt_expiry
from gharc.github.auth import PersonalAccessToken
PersonalAccessToken("ghp_example")
assert _jwt_expiry("e30.eyJleHAiOjQyfQ.c2ln", 0.0) == 42.0
print(",".join(m for m in ("jwt", "cryptography", "rich", "pygments") if m in sys.modules))
"""


def test_listener_with_a_pat_imports_no_jwt_crypto_or_httpx_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "", f"the listener imported {out.stdout.strip()}"
