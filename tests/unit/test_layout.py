"""docs/development.md's layout table is the import rule; these tests hold the code to it.

A module belongs to the table row with the longest path that contains it, and may import
modules of its own row and of the paths its row names. A new upward import fails here with
the module, the line and the row it broke, instead of surfacing later as an import loop.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV_DOC = ROOT / "docs" / "development.md"


@dataclass(frozen=True)
class Row:
    path: str  # "gharc/kube", "gharc/cli.py"
    allowed: tuple[str, ...] | None  # None: anything

    def holds(self, file: str) -> bool:
        return file == self.path or file.startswith(self.path.rstrip("/") + "/")


def layout_rows() -> list[Row]:
    """The rows of the table under ``## Layout``, as written."""
    section = DEV_DOC.read_text(encoding="utf-8").split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        path = cells[0].strip("`").rstrip("/")
        rule = cells[2]
        allowed = None if rule == "anything" else tuple(re.findall(r"`([^`]+)`", rule))
        if rule != "anything" and rule != "nothing of gharc" and not allowed:
            raise AssertionError(f"development.md: cannot read the rule {rule!r} of {path}")
        rows.append(Row(path, allowed))
    return rows


def module_file(module: str) -> str | None:
    """``gharc.kube.client`` -> ``gharc/kube/client.py`` (or the package's folder)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file():
            return "/".join(parts[:end]) + ".py"
        if base.is_dir():
            return "/".join(parts[:end])
    return None


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Absolute imports of gharc and testworld, each with its line, ``from x import y``
    resolved to ``x.y`` when ``y`` is a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                as_path = sub.replace(".", "/")
                is_module = module_file(sub) in (f"{as_path}.py", as_path)
                found.append((node.lineno, sub if is_module else node.module))
    return [(n, m) for n, m in found if m.split(".")[0] in ("gharc", "testworld")]


def owner(rows: list[Row], file: str) -> Row | None:
    holding = [r for r in rows if r.holds(file)]
    return max(holding, key=lambda r: len(r.path)) if holding else None


def test_the_table_is_readable_and_covers_every_module() -> None:
    rows = layout_rows()
    assert len(rows) >= 10, rows
    orphans = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "gharc").rglob("*.py"))
        if owner(rows, str(p.relative_to(ROOT))) is None
    ]
    assert not orphans, f"modules no row of development.md's layout table holds: {orphans}"


def test_every_import_follows_the_layout_table() -> None:
    rows = layout_rows()
    broken = []
    for path in sorted((ROOT / "gharc").rglob("*.py")):
        file = str(path.relative_to(ROOT))
        row = owner(rows, file)
        assert row is not None
        if row.allowed is None:
            continue
        for line, module in imports_of(path):
            target = module_file(module)
            if target is None or row.holds(target) or owner(rows, target) == row:
                continue
            if any(Row(a, ()).holds(target) for a in row.allowed):
                continue
            broken.append(f"{file}:{line} imports {module} (row {row.path} allows {row.allowed})")
    assert not broken, "\n".join(broken)


def test_the_product_never_imports_the_test_world() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "gharc").rglob("*.py"))
        for line, module in imports_of(path)
        if module.split(".")[0] == "testworld"
    ]
    assert not offenders, offenders


def test_a_rule_that_is_broken_is_reported() -> None:
    """The check above can fail: a module of gharc/kube importing the listener is caught."""
    rows = layout_rows()
    kube = owner(rows, "gharc/kube/client.py")
    assert kube is not None and kube.allowed is not None
    target = module_file("gharc.listener.session")
    assert target is not None
    assert not kube.holds(target)
    assert not any(Row(a, ()).holds(target) for a in kube.allowed)


@pytest.mark.timeout(240)
def test_the_wheel_carries_the_product_only(tmp_path: Path) -> None:
    """``pip wheel .`` builds what users install: gharc's modules, its CRDs, and no module
    of the test world, though the test world sits beside gharc in the source tree."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("gharc", "testworld"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
            *("-q", "-w", str(tmp_path), str(source)),
        ],
        check=True,
        capture_output=True,
        timeout=220,
    )
    (wheel,) = tmp_path.glob("gharc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"gharc"}, top
    assert "gharc/controllers/main.py" in names
    assert any(n.startswith("gharc/api/crds/") and n.endswith(".yaml") for n in names)
    assert not [n for n in names if n.startswith(("gharc/sim/", "gharc/testing/"))]


def test_reconcilers_read_numbers_from_their_options_only() -> None:
    """The flag declarations feed one options class per mode; a reconciler that read a
    default from the CLI settings module would ignore what tests and the wiring pass."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("scaleset", "legacy")
        for path in sorted((ROOT / "gharc" / "controllers" / folder).glob("*.py"))
        if path.name != "options.py"
        for line, module in imports_of(path)
        if module.startswith("gharc.controllers.settings")
    ]
    assert not offenders, offenders
