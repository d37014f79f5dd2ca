"""Children started with ``child_options`` lead their own group and die with their parent."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from testworld.sim.processes import child_options, kill_group, run_container_process
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


class FirstLine(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.set()


async def _cancelled_twice(output: logging.Logger) -> None:
    """A crash cancels a container's run, and the kubelet's stop cancels it again while
    the first cancel is still killing the process."""
    script = "import time; print('up', flush=True); time.sleep(600)"
    first = FirstLine()
    output.addHandler(first)
    run = asyncio.create_task(
        run_container_process(
            [sys.executable, "-c", script],
            env=dict(os.environ),
            stop=asyncio.Event(),
            output=output,
        )
    )
    await asyncio.wait_for(first.seen.wait(), timeout=10)
    output.removeHandler(first)
    run.cancel()
    await asyncio.sleep(0)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run


@linux_only
def test_a_run_cancelled_twice_leaves_nothing_behind_its_loop() -> None:
    """The process is reaped and its output pipe closed before the run returns, however
    often it is cancelled: a pipe left open is closed by the garbage collector after the
    loop has ended, which raises there ("Event loop is closed")."""
    output = logging.getLogger("test.container")
    output.setLevel(logging.INFO)
    unraisable: list[Any] = []
    gc.collect()  # what earlier tests left is not this run's
    previous = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            asyncio.run(_cancelled_twice(output))
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert [repr(u.exc_value) for u in unraisable] == []
