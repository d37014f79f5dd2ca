"""A pytest plugin: the fake GitHub's contract, reported at the end of a run.

Tests marked ``pins("<fact>")`` check that the fake honours a fact of the real service
(:mod:`testworld.sim.github.facts`); scenarios marked ``relies_on("<fact>", ...)`` hold only
if it does. The summary lists, per fact, how its pins did and which scenarios rely on it,
and names the scenarios in doubt when a pin failed. An unknown fact id is a usage error.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from testworld.sim.github.facts import FACTS


@dataclass
class Contract:
    pins: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    relying: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    outcomes: dict[str, str] = field(default_factory=dict)


def _facts(item: pytest.Item, marker: str) -> list[str]:
    found = [str(f) for mark in item.iter_markers(marker) for f in mark.args]
    unknown = [f for f in found if f not in FACTS]
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: {marker} names unknown facts {unknown}; known: {sorted(FACTS)}"
        )
    return found


class ContractPlugin:
    """Holds one run's contract; its methods are the hooks."""

    def __init__(self) -> None:
        self.contract = Contract()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for fact in _facts(item, "pins"):
                self.contract.pins[fact].append(item.nodeid)
            for fact in _facts(item, "relies_on"):
                self.contract.relying[fact].append(item.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcomes = self.contract.outcomes
        if report.failed:
            outcomes[report.nodeid] = "failed"
        elif report.when == "call" and report.passed:
            outcomes.setdefault(report.nodeid, "passed")
        elif report.skipped:
            outcomes.setdefault(report.nodeid, "skipped")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.contract.pins and not self.contract.relying:
            return
        terminalreporter.section("fake GitHub contract (testworld/sim/github/facts.py)")
        for line in summary_lines(self.contract):
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ContractPlugin(), "gharc-fake-contract")


def summary_lines(contract: Contract) -> list[str]:
    """One line per fact a collected test pins or relies on, then the scenarios in doubt."""
    lines: list[str] = []
    doubt: dict[str, list[str]] = {}
    for fact in sorted(set(contract.pins) | set(contract.relying)):
        runs = [contract.outcomes.get(n, "not run") for n in contract.pins.get(fact, [])]
        failed = runs.count("failed")
        note = "" if FACTS[fact].confirmed else " (the fake's choice, unconfirmed)"
        pinned = (
            f"pins {runs.count('passed')} passed, {failed} failed, "
            f"{len(runs) - runs.count('passed') - failed} not run"
            if runs
            else "no pin in this run"
        )
        lines.append(
            f"{fact:<20} {pinned}; {len(contract.relying.get(fact, []))} scenario(s) "
            f"rely on it{note}"
        )
        if failed:
            for scenario in contract.relying.get(fact, []):
                doubt.setdefault(scenario, []).append(fact)
    for scenario, facts in sorted(doubt.items()):
        lines.append(f"IN DOUBT {scenario}: the fake no longer holds {', '.join(facts)}")
    return lines
