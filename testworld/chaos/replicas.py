"""A second replica of a World's controller, and which replica leads.

A controller Deployment with ``replicaCount: 2`` runs two identical processes that elect a
leader through a Lease. :class:`Replica` starts the World's controller command again with
its own metrics port and its own ``POD_NAME``; the Lease's holder identity starts with the
``POD_NAME`` of its holder, which is how :func:`leader` tells the replicas apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from kubernetes_asyncio import client

from testworld.controlplane import free_port
from testworld.sim.processes import child_options, signal_group
from testworld.world import World


class Replica:
    """Another ``gharc controller`` process with the World's arguments."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.proc: asyncio.subprocess.Process | None = None
        self.log_path: Path | None = None
        self._log: IO[bytes] | None = None

    async def start(self) -> None:
        if self.world.log_dir is not None:
            self.world.log_dir.mkdir(parents=True, exist_ok=True)
            self.log_path = self.world.log_dir / f"controller-{self.name}.log"
            self._log = self.log_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            *self.world.controller_command(metrics_port=free_port()),
            env={**self.world.controller_environ(), "POD_NAME": self.name},
            stdout=self._log or asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.STDOUT,
            **child_options(),
        )

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s; a replica already gone is fine."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> Replica:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextlib.asynccontextmanager
async def replicas(world: World, names: list[str]) -> AsyncIterator[list[Replica]]:
    """More replicas of the World's controller, one per ``POD_NAME`` in ``names``, stopped
    (SIGTERM, then SIGKILL) on exit."""
    started = [Replica(world, name) for name in names]
    try:
        for replica in started:
            await replica.start()
        yield started
    finally:
        for replica in started:
            await replica.stop()


async def leader(world: World, lease: str) -> str | None:
    """The ``POD_NAME`` of the replica holding ``lease`` in the controller's namespace."""
    assert world.api is not None
    coordination = client.CoordinationV1Api(world.api)
    try:
        obj = await coordination.read_namespaced_lease(lease, world.controller_namespace)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    holder = obj.spec.holder_identity if obj.spec is not None else None
    return holder.rsplit("_", 1)[0] if holder else None


async def sigkill(proc: asyncio.subprocess.Process) -> None:
    """The controller's container dies at once: no shutdown, no Lease release."""
    signal_group(proc.pid, signal.SIGKILL)
    await proc.wait()
