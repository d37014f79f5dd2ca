"""The contract between the fake GitHub and the real one: every fact is pinned by a test, a
scenario names only known facts, and a failed pin names the scenarios it puts in doubt."""

from __future__ import annotations

import re
from pathlib import Path

from testworld.contract import Contract, summary_lines
from testworld.sim.github.facts import FACTS

TESTS = Path(__file__).resolve().parents[3]
MARK = re.compile(r"@pytest\.mark\.(pins|relies_on)\(([^)]*)\)")


def _marks() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"pins": set(), "relies_on": set()}
    for path in TESTS.rglob("test_*.py"):
        for kind, args in MARK.findall(path.read_text(encoding="utf-8")):
            found[kind] |= set(re.findall(r'"([^"]+)"', args))
    return found


def test_every_fact_is_pinned_by_a_test_and_every_mark_names_a_fact() -> None:
    marks = _marks()
    assert set(FACTS) <= marks["pins"], f"facts no test pins: {set(FACTS) - marks['pins']}"
    unknown = (marks["pins"] | marks["relies_on"]) - set(FACTS)
    assert not unknown, f"marks naming unknown facts: {unknown}"


def test_a_failed_pin_puts_the_scenarios_relying_on_it_in_doubt() -> None:
    contract = Contract()
    contract.pins["truncate-50"].append("tests/unit/sim/x.py::test_pin")
    contract.relying["truncate-50"].append("tests/e2e/y.py::test_scenario")
    contract.relying["capacity"].append("tests/e2e/y.py::test_scenario")
    contract.outcomes["tests/unit/sim/x.py::test_pin"] = "failed"
    lines = summary_lines(contract)
    assert any(line.startswith("truncate-50") and "1 failed" in line for line in lines)
    assert any(line.startswith("capacity") and "no pin in this run" in line for line in lines)
    assert "IN DOUBT tests/e2e/y.py::test_scenario: the fake no longer holds truncate-50" in lines


def test_a_passing_pin_leaves_no_doubt() -> None:
    contract = Contract()
    contract.pins["session-409"].append("a::pin")
    contract.relying["session-409"].append("b::scenario")
    contract.outcomes["a::pin"] = "passed"
    assert not [line for line in summary_lines(contract) if line.startswith("IN DOUBT")]
