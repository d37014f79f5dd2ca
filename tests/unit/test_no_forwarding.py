"""Every name is imported from the module that defines it.

A module that imports a name only so that other modules can import it from there
("forwarding") gives one name two addresses: a reader looking for ``format_time`` opens the
wrong file, and the forwarding import cannot be removed without touching every user. Only the
package facades in :data:`PUBLIC_FACADES` re-export, because re-exporting is their job.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("gharc", "testworld", "tests", "bench")
OURS = ("gharc", "testworld")

# Packages whose __init__ is a deliberate public API: users import the package's names
# from the package, wherever inside it they are defined.
PUBLIC_FACADES = frozenset(
    {
        "gharc.kube",  # its docstring: "Everything listed in __all__ is public API"
        "gharc.github",  # the GitHub client package; names its public names in __all__
        "testworld.sim.github",  # the fake GitHub's one import point for tests and demos
        "testworld.chaos",  # the chaos harness: case table and report, in __all__
    }
)


def is_ours(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in OURS


def module_path(root: Path, module: str) -> Path | None:
    """The file of ``module`` under ``root`` (a package's ``__init__.py``), or None."""
    base = root.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at import time, including those under ``if``/``try``/``with``."""
    out = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If | ast.Try | ast.With):
            out += _top_level(stmt.body)
            out += _top_level(getattr(stmt, "orelse", []))
            out += _top_level(getattr(stmt, "finalbody", []))
            for handler in getattr(stmt, "handlers", []):
                out += _top_level(handler.body)
    return out


def defined_and_forwarded(path: Path) -> tuple[set[str], set[str]]:
    """Names the module defines (def, class, assignment) and names it imports from our
    own modules."""
    defined: set[str] = set()
    imported: set[str] = set()
    for stmt in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and is_ours(stmt.module):
            imported |= {a.asname or a.name for a in stmt.names}
    return defined, imported


def forwarded_uses(root: Path) -> list[str]:
    """Each ``from M import N`` and ``M.N`` (M one of our modules, N not a submodule) where
    M does not define N, as ``file:line: text``."""
    known: dict[str, tuple[set[str], set[str]] | None] = {}

    def names_of(module: str) -> tuple[set[str], set[str]] | None:
        if module not in known:
            path = module_path(root, module)
            known[module] = None if path is None else defined_and_forwarded(path)
        return known[module]

    def is_module(name: str) -> bool:
        return module_path(root, name) is not None

    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            module_aliases: dict[str, str] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname and is_ours(a.name) and is_module(a.name):
                            module_aliases[a.asname] = a.name
                if not (isinstance(node, ast.ImportFrom) and node.level == 0):
                    continue
                if node.module is None or not is_ours(node.module):
                    continue
                names = names_of(node.module)
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    if is_module(sub) and (names is None or a.name not in names[0]):
                        module_aliases[a.asname or a.name] = sub
                    elif (
                        a.name != "*"
                        and node.module not in PUBLIC_FACADES
                        and names is not None
                        and a.name not in names[0]
                    ):
                        found.append(f"{where}:{node.lineno}: from {node.module} import {a.name}")
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                    continue
                module = module_aliases.get(node.value.id)
                if module is None or module in PUBLIC_FACADES:
                    continue
                names = names_of(module)
                if not names or node.attr not in names[1] - names[0]:
                    continue
                if not is_module(f"{module}.{node.attr}"):
                    found.append(f"{where}:{node.lineno}: {module}.{node.attr}")
    return found


def test_every_name_is_imported_from_where_it_is_defined() -> None:
    forwarded = forwarded_uses(ROOT)
    assert not forwarded, "import these from the module that defines them:\n" + "\n".join(forwarded)


def exported_but_not_defined(root: Path) -> list[str]:
    """``__all__`` entries naming something the module only imports (facades excepted): an
    ``__all__`` entry invites other modules to import the name from there."""
    found = []
    for folder in OURS:
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            if module.removesuffix(".__init__") in PUBLIC_FACADES:
                continue
            defined, _ = defined_and_forwarded(path)
            for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
                ):
                    found += [
                        f"{path.relative_to(root)}: __all__ lists {e.value}"
                        for e in ast.walk(stmt.value)
                        if isinstance(e, ast.Constant) and e.value not in defined
                    ]
    return found


def test_no_module_exports_a_name_it_imports() -> None:
    exported = exported_but_not_defined(ROOT)
    assert not exported, "\n".join(exported)


def test_a_forwarded_name_is_reported(tmp_path: Path) -> None:
    """The check above can fail: both ways of reaching a forwarded name are caught."""
    for folder in SCANNED:
        (tmp_path / folder).mkdir()
    (tmp_path / "gharc" / "__init__.py").write_text("")
    (tmp_path / "gharc" / "a.py").write_text("def Foo() -> None: ...\n")
    (tmp_path / "gharc" / "b.py").write_text('from gharc.a import Foo\n__all__ = ["Foo"]\n')
    (tmp_path / "gharc" / "c.py").write_text(
        "from gharc import a, b\nfrom gharc.a import Foo\nfrom gharc.b import Foo as F\n"
        "a.Foo()\nb.Foo()\n"
    )
    assert forwarded_uses(tmp_path) == [
        "gharc/c.py:3: from gharc.b import Foo",
        "gharc/c.py:5: gharc.b.Foo",
    ]
    assert exported_but_not_defined(tmp_path) == ["gharc/b.py: __all__ lists Foo"]
