"""Child processes of the test world die with it.

Every process the simulator or the test harness starts (listeners, the controller, etcd,
kube-apiserver) gets its own process group, so a kill reaches whatever it forked, and on
Linux a parent-death signal, so a test run or demo that is killed (SIGKILL, OOM, a CI
timeout) does not leave listeners polling the fake GitHub or a control plane holding
ports. ``kill_group`` is the container runtime's kill: the whole group, then reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGKILL when its parent dies.

    Hand-written with ctypes: the standard library has no ``prctl``, and a package for one
    call is not worth a dependency. ``None`` off Linux. NB: the kernel sends the signal when
    the *thread* that forked the child exits, so spawn from a thread that lives as long as
    the child should (the event loop's, or an executor thread kept until the loop closes).
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def child_options() -> dict[str, Any]:
    """Keyword arguments for ``subprocess.Popen`` / ``asyncio.create_subprocess_exec``:
    a new session (hence process group, led by the child) and the parent-death signal."""
    options: dict[str, Any] = {"start_new_session": True}
    preexec = die_with_parent()
    if preexec is not None:
        options["preexec_fn"] = preexec
    return options


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def kill_group(proc: asyncio.subprocess.Process) -> int:
    """SIGKILL the child's whole group and reap the child; returns its exit status.

    Shielded: a second cancellation of the caller must not leave the child unreaped.
    """
    signal_group(proc.pid, signal.SIGKILL)
    return await asyncio.shield(proc.wait())
