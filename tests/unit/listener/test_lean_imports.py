"""A pod-mode listener with a PAT loads only what it needs: no PyJWT, no cryptography (only
GitHub App credentials sign a JWT), not httpx's command-line client (click, rich,
pygments), no pydantic, typer or hishel. Each is MiBs in every listener process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gharc.cli import plain_listener_command

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


# ``gharc listener --config PATH`` as the pod runs it, up to its first network step: the
# config read, the GitHub client and metrics built, the Kubernetes client configured (none
# here: HOME is empty, so it exits 1 there). What it imported is printed at exit.
RUN = """
import atexit, sys
atexit.register(lambda: print(",".join(sorted({m.split(".")[0] for m in sys.modules}))))
sys.argv = ["gharc", "listener", "--config", sys.argv[1]]
import gharc.cli
gharc.cli.main()
"""

NOT_IN_A_LISTENER = (
    "pydantic",
    "pydantic_core",
    "typer",
    "click",
    "aiohttp",
    "jwt",
    "hishel",  # the REST cache: a listener's REST client only posts (with sqlite3, msgpack)
    "sqlite3",
    "msgpack",
    "dateutil",  # scheduled overrides' rules: only with scheduled_overrides in the config
)


def test_the_listener_command_runs_without_pydantic_typer_or_hishel(tmp_path: Path) -> None:
    """pydantic (its core and schemas: about 9 MiB of RSS), typer (about 3 MiB, and it
    imports pydantic itself while parsing arguments) and hishel (2.3 MiB) stay out of a
    pod-mode listener."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "configure_url": "https://github.com/acme",
                "github_token": "ghp_example",
                "ephemeral_runner_set_namespace": "arc-runners",
                "ephemeral_runner_set_name": "set",
                "runner_scale_set_id": 1,
                "metrics_addr": "",
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
    )
    assert out.returncode == 1, out.stderr
    assert "Kubernetes client configuration" in out.stderr, out.stderr
    loaded = set(out.stdout.strip().split(","))
    assert "gharc" in loaded and "httpx" in loaded, out.stdout
    assert not loaded & set(NOT_IN_A_LISTENER), loaded & set(NOT_IN_A_LISTENER)


@pytest.mark.parametrize(
    ("argv", "config"),
    [
        (["listener"], None),
        (["listener", "--config", "/c.json"], "/c.json"),
        (["listener", "--config=/c.json"], "/c.json"),
    ],
)
def test_a_plain_listener_command_skips_typer(argv: list[str], config: str | None) -> None:
    assert plain_listener_command(argv) == (config,)


@pytest.mark.parametrize(
    "argv",
    [
        ["listener", "--help"],
        ["listener", "--config"],
        ["listener", "--config", "--help"],
        ["listener", "--config="],
        ["listener", "extra"],
        ["controller"],
        [],
    ],
)
def test_anything_else_goes_through_typer(argv: list[str]) -> None:
    assert plain_listener_command(argv) is None
