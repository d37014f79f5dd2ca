"""Holds the leader Lease from a thread and event loop of its own.

The controller's event loop is shared by every scale set's reconciles and listeners, and a
tenant's input can hold it (a slow template, a metrics scrape, a bug). If the Lease were
renewed on that loop, a 15 s stall would cost the Lease, the next leader would meet the
same input and stall too, and the stalled replica would go on writing after its successor
started. Here the :class:`~gharc.kube.leaderelection.LeaderElector` runs on a thread with
its own loop and its own connections (:meth:`KubeClient.fork`), so renewals go on while
the main loop is held; what the main loop may write is bounded by the
:class:`~gharc.kube.fence.WriteFence` each renewal extends.

Callbacks come back to the main loop with ``call_soon_threadsafe``: the keeper never runs
the manager's code on its thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from gharc.kube.client import KubeClient
from gharc.kube.fence import WriteFence
from gharc.kube.leaderelection import LeaderElectionConfig, LeaderElector

__all__ = ["LeaseKeeper"]

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Usage (from the main loop)::

    keeper = LeaseKeeper(kube, config, kube.fence, on_started=start, on_lost=lost)
    keeper.start()          # returns at once; on_started runs on this loop once elected
    ...
    await keeper.stop()     # releases the Lease (when so configured) and joins the thread

    ``on_lost`` runs on the main loop when leadership ended without :meth:`stop`.
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        fence: WriteFence,
        *,
        on_started: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        self._client = client
        self.config = config
        self.fence = fence
        self._on_started = on_started
        self._on_lost = on_lost
        self._main: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._ready = threading.Event()
        self.elector: LeaderElector | None = None

    @property
    def is_leader(self) -> bool:
        return self.elector is not None and self.elector.is_leader

    def start(self) -> None:
        self._main = asyncio.get_running_loop()
        self.fence.arm()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-keeper-{self.config.name}", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """Stop leading (releasing the Lease if configured) and wait for the thread."""
        self._stopping = True
        self.fence.close()
        thread = self._thread
        if thread is None:
            return
        await asyncio.to_thread(self._ready.wait, 10)
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed between the check and the call
        await asyncio.to_thread(thread.join, 30)

    # -- the keeper's thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._lead())
        except Exception:
            log.exception("leader election %s: the lease keeper failed", self.config.name)
        finally:
            self._ready.set()
            self.fence.close()
            if not self._stopping:
                self._to_main(self._on_lost)

    async def _lead(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        client = self._client.fork()
        self.elector = LeaderElector(
            client,
            self.config,
            on_started_leading=lambda: self._to_main(self._on_started),
            fence=self.fence,
        )
        self._ready.set()
        try:
            if not self._stopping:
                await self.elector.run()
        except asyncio.CancelledError:
            pass
        finally:
            await client.close()

    def _to_main(self, callback: Callable[[], None]) -> None:
        main = self._main
        if main is None or main.is_closed():
            return
        try:
            main.call_soon_threadsafe(callback)
        except RuntimeError:
            pass  # the main loop closed while the thread finished
