"""Chaos fixtures and the per-case table.

Each test gets a :class:`~testworld.worlds.WorldFactory` on the session control plane
and records its :class:`~testworld.chaos.CaseResult` with ``chaos_results``; at the end of
the run the table goes to the terminal (whatever ``-s`` says) and to
``chaos-report.txt`` in the chaos log folder, next to the controllers' logs.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from _chaos import Case, RunCase

from testworld.chaos import CaseResult, problems, table
from testworld.worlds import WorldFactory

#: Controller logs (one folder per case namespace) and the report; outside pytest's
#: rotating basetemp so that a failed run's logs survive other runs on the machine.
LOG_DIR = Path(tempfile.gettempdir()) / "gharc-chaos-logs"
RESULTS = pytest.StashKey[list[CaseResult]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS] = []


@pytest.fixture
def chaos_results(request: pytest.FixtureRequest) -> list[CaseResult]:
    """Append a case's result here; it is printed in the table at the end of the run."""
    return request.config.stash[RESULTS]


@pytest_asyncio.fixture
async def worlds(kubeconfig: str) -> AsyncIterator[WorldFactory]:
    factory = WorldFactory(kubeconfig, LOG_DIR)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
def run_case(worlds: WorldFactory, chaos_results: list[CaseResult]) -> RunCase:
    """Every case's common part: run it in a namespace, record its result for the table and
    fail on its problems (jobs that never got a runner, ...). The test checks the rest."""

    async def run(case: Case, namespace: str) -> CaseResult:
        result = await case(worlds, namespace)
        chaos_results.append(result)
        assert not problems(result), (problems(result), result.extra)
        return result

    return run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    results = terminalreporter.config.stash.get(RESULTS, [])
    if not results:
        return
    text = table(results)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    path = LOG_DIR / "chaos-report.txt"
    path.write_text(text + "\n")
    terminalreporter.write_sep("=", "chaos cases")
    terminalreporter.write_line(text)
    terminalreporter.write_line(f"(also in {path}; controller logs under {LOG_DIR})")
