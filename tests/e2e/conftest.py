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

Every test and fixture here runs on the session event loop (``loop_scope="session"``) so
the background task keeps running between tests.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator
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
    """A scenario task started once per session, collected by its own test at the end."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.factory: WorldFactory | None = None


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def b1_background(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Background]:
    from _e2e_b1 import run_b1_scenario

    bg = Background()
    bg.factory = WorldFactory(control_plane.kubeconfig_path, LOG_DIR)
    bg.task = asyncio.create_task(run_b1_scenario(bg.factory), name="e2e-b1")
    try:
        yield bg
    finally:
        if not bg.task.done():
            bg.task.cancel()
        await asyncio.gather(bg.task, return_exceptions=True)
        await bg.factory.close()


@pytest.fixture(autouse=True)
def _b1_overlap(request: pytest.FixtureRequest) -> None:
    """Start the B1 background with the first confined test when B1 is selected.

    A plain fixture on purpose: pytest-asyncio sets an async fixture up from outside the
    loop, which ``getfixturevalue`` inside a running loop could not do."""
    if E2E_DIR not in Path(str(request.node.fspath)).parents:
        return
    if not any(i.get_closest_marker("b1_result") for i in request.session.items):
        return
    if request.node.get_closest_marker("exclusive"):
        bg = _started_background(request)
        if bg is not None and bg.task is not None and not bg.task.done():
            pytest.fail("an exclusive test must run before the B1 background starts")
        return
    request.getfixturevalue("b1_background")


def _started_background(request: pytest.FixtureRequest) -> Background | None:
    defs = request._fixturemanager.getfixturedefs("b1_background", request.node)
    if not defs:
        return None
    cached = getattr(defs[-1], "cached_result", None)
    return cached[0] if cached else None
