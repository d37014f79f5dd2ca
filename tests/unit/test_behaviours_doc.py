"""docs/behaviours.md names, for each of B1-B6, the code that does it and the tests that pin
it; a rename that forgets the page fails here instead of leaving a reader at a dead path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "behaviours.md").read_text(encoding="utf-8")
BEHAVIOURS = [f"B{n}" for n in range(1, 7)]


def section(name: str) -> str:
    start = PAGE.index(f"## {name}.")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end != -1 else None]


def paragraph(text: str, label: str) -> str:
    start = text.index(f"**{label}.**")
    end = text.find("\n**", start + 1)
    return text[start : end if end != -1 else None]


def paths_in(text: str) -> list[str]:
    return [p for p in re.findall(r"`([^`\s]+)`", text) if "/" in p and p.endswith(".py")]


@pytest.mark.parametrize("name", BEHAVIOURS)
def test_each_behaviour_names_its_code_and_the_code_exists(name: str) -> None:
    text = section(name)
    assert "**Code.**" in text, f"docs/behaviours.md {name} has no **Code.** line"
    code = paths_in(paragraph(text, "Code"))
    assert code and all(p.startswith("gharc/") for p in code), code
    missing = [p for p in code if not (ROOT / p).is_file()]
    assert not missing, f"{name}: **Code.** names files that do not exist: {missing}"


@pytest.mark.parametrize("name", BEHAVIOURS)
def test_each_behaviour_names_tests_that_exist(name: str) -> None:
    tests = paths_in(paragraph(section(name), "Tests"))
    assert tests, f"docs/behaviours.md {name} names no test"
    missing = [p for p in tests if not (ROOT / p).is_file()]
    assert not missing, f"{name}: **Tests.** names files that do not exist: {missing}"


def test_a_dead_path_is_caught() -> None:
    assert paths_in("**Code.** `gharc/listener/nope.py` (x)") == ["gharc/listener/nope.py"]
    assert not (ROOT / "gharc/listener/nope.py").is_file()
