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
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
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


async def run_container_process(
    command: list[str], *, env: dict[str, str], stop: asyncio.Event, output: logging.Logger
) -> int:
    """Run ``command`` as a container's process: its output goes to ``output`` line by
    line, ``stop`` sends it SIGTERM, and however the run ends (an exit, or a cancel for a
    crash, an eviction or a grace period run out) its whole group is killed and reaped
    and its output pipe closed before this returns. The exit code, as a container reports
    it (128 + signal)."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    try:
        # NB: a pipe of our own, not ``stdout=PIPE``: that one belongs to the subprocess
        # transport, which closes it only after EOF was read, so a run cancelled before
        # then left it to the garbage collector, after the loop had closed.
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=write_fd, stderr=write_fd, **child_options()
        )
    except BaseException:
        transport.close()
        raise
    finally:
        os.close(write_fd)  # the child has its copy: EOF comes when its group is gone
    pump = asyncio.create_task(_pump(reader, output))
    try:
        code = await _supervise(proc, stop)
    finally:
        # NB: here, not only on the normal path: a fault cancels this task, and the
        # process must be dead (and reaped) before the kubelet reports the container
        # terminated. Any process the listener forked goes with it.
        await _to_the_end(_end(proc, pump, transport))
    return code if code >= 0 else 128 - code


async def _end(
    proc: asyncio.subprocess.Process, pump: asyncio.Task[None], transport: asyncio.BaseTransport
) -> None:
    try:
        await kill_group(proc)
        await asyncio.gather(pump, return_exceptions=True)
    finally:
        pump.cancel()
        transport.close()


async def _to_the_end(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run ``cleanup`` to its end even if cancelled meanwhile (then re-raise the cancel):
    a container's kill and reap take milliseconds, and half of one leaves a process."""
    task = asyncio.ensure_future(cleanup)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


async def _supervise(proc: asyncio.subprocess.Process, stop: asyncio.Event) -> int:
    """Wait for the process to exit; SIGTERM it when ``stop`` is set (the grace period is
    the kubelet's to enforce: it cancels the run)."""
    stopping = asyncio.create_task(stop.wait())
    waiter = asyncio.create_task(proc.wait())
    try:
        done, _ = await asyncio.wait({waiter, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        return await waiter
    finally:
        stopping.cancel()
        waiter.cancel()


async def _pump(reader: asyncio.StreamReader, output: logging.Logger) -> None:
    async for line in reader:
        output.info("%s", line.decode(errors="replace").rstrip())
