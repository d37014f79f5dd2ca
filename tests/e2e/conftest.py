"""End-to-end fixtures: a whole gharc ``World`` per test on the session control plane.

Isolation. Every test gets its own fake GitHub, its own ``gharc controller`` subprocess and
its own kubelet simulator, all confined to one fresh namespace (the controller runs with
``--watch-single-namespace`` on it, listeners and runners live there too). Worlds confined
like that can run at the same time without touching each other's objects, which is what
lets the three-minute B1 observation (``b1_background``) run in the background while the
other tests run, instead of adding three minutes to the suite.

A test that needs a controller spanning namespaces (``@pytest.mark.exclusive``) would
reconcile every other World's objects, so it is ordered before the background starts
(see ``pytest_collection_modifyitems``), and it waits the background out if run after it.

The B1 scenario runs on a thread with its own event loop, so it keeps running between
tests and through the other tiers' synchronous fixtures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from _e2e import WorldFactory, unique_namespace

from testworld.controlplane import ControlPlane
from testworld.world import World

log = logging.getLogger("gharc.tests.e2e")

#: The fake's message long poll, seconds. GitHub holds it ~50 s; the tests use a short one
#: so that a listener which only re-publishes its patch on an empty poll (see
#: test_e2e_stall.py) does not stall them, and test that stall on its own.
SHORT_POLL = 3.0

E2E_DIR = Path(__file__).parent
#: Controller logs, one folder per test namespace; outside pytest's rotating basetemp so a
#: failed run's logs survive other runs on the machine.
LOG_DIR = Path(tempfile.gettempdir()) / "gharc-e2e-logs"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "exclusive: needs a controller that watches every namespace (runs first)"
    )
    config.addinivalue_line("markers", "b1_result: collects the background B1 run (runs last)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Exclusive tests first (before the background starts), the B1 collector last."""

    def rank(item: pytest.Item) -> int:
        if E2E_DIR not in Path(str(item.fspath)).parents:
            return 1
        if item.get_closest_marker("exclusive"):
            return 0
        if item.get_closest_marker("b1_result"):
            return 2
        return 1

    items.sort(key=rank)  # stable: keeps file and definition order within a rank


@pytest_asyncio.fixture(loop_scope="session")
async def worlds(
    kubeconfig: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[WorldFactory]:
    factory = WorldFactory(kubeconfig, LOG_DIR)
    try:
        yield factory
    finally:
        await factory.close()


@pytest_asyncio.fixture(loop_scope="session")
async def world(worlds: WorldFactory, request: pytest.FixtureRequest) -> World:
    """A confined World (controller, kubelet, fake GitHub) in a fresh namespace; the
    namespace is ``world.controller_namespace``: listeners and runners both live there."""
    return await worlds.create(unique_namespace(request), poll_timeout=SHORT_POLL)


# -- the background B1 run ----------------------------------------------------------------
class Background:
    """A scenario started once per session on its own thread and event loop, collected by
    its own test at the end.

    Its own loop because the session loop is not always free: a synchronous fixture of a
    later tier (the real node's image build holds it for minutes) would freeze the fake
    GitHub this scenario serves, and its listener would time out against a fake that no
    longer answers instead of against the revoked token the scenario is about."""

    def __init__(self) -> None:
        self.result: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._thread: threading.Thread | None = None

    def start(self, kubeconfig: str) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(kubeconfig,), name="e2e-b1", daemon=True
        )
        self._thread.start()

    def _run(self, kubeconfig: str) -> None:
        from _e2e_b1 import run_b1_scenario

        async def scenario() -> Any:
            factory = WorldFactory(kubeconfig, LOG_DIR)
            try:
                return await run_b1_scenario(factory)
            finally:
                await factory.close()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            try:
                self.result.set_result(await scenario())
            except BaseException as exc:  # handed to the collecting test, not lost
                self.result.set_exception(exc)

        with contextlib.suppress(BaseException):
            asyncio.run(main())
        if not self.result.done():
            self.result.set_exception(RuntimeError("the B1 scenario's loop ended early"))

    async def wait(self, timeout: float) -> Any:
        """The scenario's result (or its exception), waiting off the session loop."""
        return await asyncio.wait_for(asyncio.wrap_future(self.result), timeout)

    def stop(self) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not self.result.done():
            loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(60)


@pytest.fixture(scope="session")
def b1_background(control_plane: ControlPlane) -> Iterator[Background]:
    bg = Background()
    bg.start(control_plane.kubeconfig_path)
    try:
        yield bg
    finally:
        bg.stop()


@pytest.fixture(autouse=True)
def _b1_overlap(request: pytest.FixtureRequest) -> None:
    """Start the B1 background with the first confined test when B1 is selected.

    A plain fixture on purpose: ``getfixturevalue`` runs fixtures from here, outside any
    loop."""
    if E2E_DIR not in Path(str(request.node.fspath)).parents:
        return
    if not any(i.get_closest_marker("b1_result") for i in request.session.items):
        return
    if request.node.get_closest_marker("exclusive"):
        bg = _started_background(request)
        if bg is not None and not bg.result.done():
            pytest.fail("an exclusive test must run before the B1 background starts")
        return
    request.getfixturevalue("b1_background")


def _started_background(request: pytest.FixtureRequest) -> Background | None:
    defs = request._fixturemanager.getfixturedefs("b1_background", request.node)
    if not defs:
        return None
    cached = getattr(defs[-1], "cached_result", None)
    return cached[0] if cached else None
