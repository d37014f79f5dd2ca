"""Children started with ``child_options`` lead their own group and die with their parent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testworld.sim.processes import child_options, kill_group
from testworld.wait import eventually

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux")

PARENT = """
import subprocess, sys, time
from testworld.sim.processes import child_options
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **child_options())
print(child.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@linux_only
def test_a_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        assert os.getpgid(child) == child  # its own group, not the parent's
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@linux_only
async def test_kill_group_kills_the_forked_grandchild_too() -> None:
    script = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "print(p.pid, flush=True); time.sleep(600)"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, **child_options()
    )
    assert proc.stdout is not None
    grandchild = int(await proc.stdout.readline())
    code = await kill_group(proc)
    assert code == -signal.SIGKILL

    async def gone() -> bool:
        return not alive(grandchild)

    await eventually(gone, timeout=5, message="the forked grandchild killed with the group")
