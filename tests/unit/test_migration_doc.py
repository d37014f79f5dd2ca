"""docs/migration-from-arc.md names tests, chart values and flags; each must exist.

The page is what a user follows to move a cluster between ARC and gharc, and every claim on
it says which test pins it. A test renamed, a chart value misspelt or a flag that does not
exist would send that user to a dead end (or, for a value, to a render that silently does
something else), so each reference is checked here against the repository:

* every repository path (``tests/...``, ``gharc/...``, ``charts/...``) is a file or folder;
* every value named in the first column of the "Values gharc refuses" and "Values gharc
  maps" tables is one the chart knows: in its ``values.yaml``, its ``values.schema.json``,
  the experimental layout's known keys (``_experimental.tpl``) or its templates' text (a
  refused value is read by the template that refuses it, and named in its message);
* every ``--flag`` is a flag of the command it is given to: ``gharc controller``'s declared
  (or accepted-and-ignored ARC) flags for a bare flag, the typer options of other ``gharc``
  subcommands; ``helm`` and ``kubectl`` command lines are theirs and not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from gharc.commands import app
from gharc.controllers.settings import IGNORED_ARC_FLAGS, ControllerSettings
from gharc.settings.declare import declared

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "migration-from-arc.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
CHARTS = ROOT / "charts"

REFUSED = "## Values gharc refuses"
MAPPED = "## Values gharc maps"
WILD = "*"


# --- the page ----------------------------------------------------------------------------


def section(text: str, heading: str) -> str:
    """From ``heading`` (a line starting with it) to the next heading of its level."""
    start = text.index(f"\n{heading}") + 1
    level = heading.split(" ", 1)[0]
    end = text.find(f"\n{level} ", start + len(heading))
    return text[start : end if end != -1 else None]


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the Markdown tables in ``text``."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(cells)
    # Drop each table's header row: the row right before a separator line.
    headers = {
        tuple(c.strip() for c in prev.strip().strip("|").split("|"))
        for prev, line in zip(text.splitlines(), text.splitlines()[1:], strict=False)
        if line.startswith("|") and set(line) <= {"|", "-", " "}
    }
    return [r for r in rows if tuple(r) not in headers]


def spans(text: str) -> list[str]:
    """Inline code spans (single backticks, possibly across a line break)."""
    return re.findall(r"(?<!`)`([^`]+)`(?!`)", text)


def value_paths(cell: str) -> list[str]:
    """The values a table cell names: its first code span, and every other span that is
    a dotted path (``containerMode.kubernetesModeWorkVolumeClaim``); literals such as
    ``dind`` or ``Name:`` after the first are not values."""
    found = spans(cell)
    return [p for i, p in enumerate(found) if i == 0 or re.fullmatch(r"[\w<>*]+(\.[\w<>*]+)+", p)]


def normalized(path: str) -> list[str]:
    """``containerMode.type: kubernetes`` -> [containerMode, type]; ``runner.*`` ->
    [runner]; ``resource.<object>.metadata`` -> [resource, *, metadata]."""
    path = path.split(":", 1)[0].strip()
    parts = path.split(".")
    while parts and parts[-1] == WILD:
        parts.pop()
    return [WILD if re.fullmatch(r"<\w+>|\*", p) else p for p in parts]


def rows_with_chart() -> list[tuple[str, str]]:
    """(chart, value) for each value the two tables name."""
    out: list[tuple[str, str]] = []
    for cells in table_rows(section(DOC, REFUSED)):
        out += [(cells[0], v) for v in value_paths(cells[1])]
    for cells in table_rows(section(DOC, MAPPED)):
        out += [("gharc-scale-set", v) for v in value_paths(cells[0])]
    return out


# --- what a chart knows ------------------------------------------------------------------


def resolves(tree: Any, parts: list[str]) -> bool:
    """``parts`` is a path in nested dicts; ``*`` matches any key."""
    if not parts:
        return True
    if not isinstance(tree, dict):
        return False
    head, rest = parts[0], parts[1:]
    if head == WILD:
        return any(resolves(v, rest) for v in tree.values())
    return head in tree and resolves(tree[head], rest)


def schema_tree(schema: Any) -> Any:
    """A JSON schema's ``properties`` as nested dicts (array items under their property)."""
    if not isinstance(schema, dict):
        return {}
    props = dict(schema.get("properties") or {})
    items = schema.get("items")
    out: dict[str, Any] = {}
    for key, sub in props.items():
        out[key] = schema_tree(sub)
    if isinstance(items, dict):
        out.update(schema_tree(items))
    return out


def experimental_tree(tpl: str) -> dict[str, Any]:
    """The keys ``_experimental.tpl`` knows: each ``"name" "<path>" ... "known" (list ...)``,
    ``resource.%s`` standing for every object it lists."""
    tree: dict[str, Any] = {}
    objects = re.search(r'\$objects := list ((?:"\w+"\s*)+)', tpl)
    object_names = re.findall(r'"(\w+)"', objects.group(1)) if objects else []
    pattern = (
        r'"name" (?:"([\w.]+)"|\(printf "([\w.%]+)" \$object\)) "in" [$\w.]+ '
        r'"known" \((?:prepend \$objects "all"|list ((?:"\w+"\s*)+))\)'
    )
    for plain, printed, known in re.findall(pattern, tpl):
        name = plain or printed
        keys = re.findall(r'"(\w+)"', known) if known else [*object_names, "all"]
        prefixes = [name] if "%s" not in name else [name.replace("%s", o) for o in object_names]
        for prefix in prefixes:
            node = tree
            for part in prefix.split("."):
                node = node.setdefault(part, {})
            for key in keys:
                node.setdefault(key, {})
    return tree


def in_templates(text: str, parts: list[str]) -> bool:
    """The templates read or name the value: ``a.b`` (``*`` any key or ``%s``) anywhere for
    a dotted path; for one key, ``.Values.key``, ``$v.key`` or ``"key"``."""
    if len(parts) == 1:
        key = re.escape(parts[0])
        return re.search(rf'(\.Values\.|\$v\.){key}\b|"{key}"', text) is not None
    body = r"\.".join(r"(?:\w+|%s)" if p == WILD else re.escape(p) for p in parts)
    return re.search(rf"(?<![\w]){body}(?![\w])", text) is not None


class Chart:
    """What one chart knows of its values."""

    def __init__(self, name: str) -> None:
        folder = CHARTS / name
        self.values = yaml.safe_load((folder / "values.yaml").read_text(encoding="utf-8"))
        self.schema = schema_tree(
            json.loads((folder / "values.schema.json").read_text(encoding="utf-8"))
        )
        texts = [p.read_text(encoding="utf-8") for p in sorted((folder / "templates").iterdir())]
        self.templates = "\n".join(texts)
        experimental = folder / "templates" / "_experimental.tpl"
        self.experimental = (
            experimental_tree(experimental.read_text(encoding="utf-8"))
            if experimental.is_file()
            else {}
        )

    def knows(self, path: str) -> bool:
        parts = normalized(path)
        return bool(parts) and (
            resolves(self.values, parts)
            or resolves(self.schema, parts)
            or resolves(self.experimental, parts)
            or in_templates(self.templates, parts)
        )


# --- flags -------------------------------------------------------------------------------


def controller_flags() -> set[str]:
    flags = set(IGNORED_ARC_FLAGS)
    for d in declared(ControllerSettings):
        flags.update(d.spec.flags)
    return flags


def subcommand_flags() -> dict[str, set[str]]:
    """Long options of each ``gharc`` subcommand that typer defines (not ``controller``,
    whose flags are its own parser's)."""
    commands: dict[str, Any] = getattr(typer.main.get_command(app), "commands", {})
    assert commands, "gharc has no subcommands?"
    out: dict[str, set[str]] = {}
    for name, command in commands.items():
        out[name] = {o for p in command.params for o in p.opts if o.startswith("--")}
    return out


def command_lines(text: str) -> Iterator[str]:
    """Inline code spans, and the commands of fenced blocks (``\\`` continuations joined)."""
    fenced = re.findall(r"```\w*\n(.*?)```", text, flags=re.S)
    yield from spans(re.sub(r"```\w*\n.*?```", "", text, flags=re.S))
    for block in fenced:
        yield from block.replace("\\\n", " ").splitlines()


def flag_problems(text: str, controller: set[str], others: dict[str, set[str]]) -> list[str]:
    """Each ``--flag`` in ``text`` that the command it is given to does not have."""
    problems = []
    for line in command_lines(text):
        for segment in re.split(r"\||&&|;", line):
            tokens = segment.split()
            if not tokens or tokens[0] in ("helm", "kubectl"):
                continue
            flags = [t.split("=", 1)[0] for t in tokens if t.startswith("--")]
            if not flags:  # prose in a span (an error message), or a command without flags
                continue
            if tokens[0] == "gharc" and len(tokens) > 1 and tokens[1] != "controller":
                known = others.get(tokens[1])
                if known is None:
                    problems.append(f"{segment.strip()!r}: no subcommand gharc {tokens[1]}")
                    continue
            elif tokens[0] == "gharc" or tokens[0].startswith("--"):
                known = controller
            else:
                continue
            problems += [f"{segment.strip()!r}: {f}" for f in flags if f not in known]
    return problems


# --- the tests ---------------------------------------------------------------------------


def repo_paths(text: str) -> list[str]:
    return sorted(set(re.findall(r"(?<![\w/.-])((?:tests|gharc|charts)/[\w./-]*[\w/])", text)))


def test_every_repository_path_exists() -> None:
    paths = repo_paths(DOC)
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/migration-from-arc.md names paths that do not exist: {missing}"


def test_the_claims_name_their_tests() -> None:
    """Guards the guard: a page that stopped naming tests would pass the test above."""
    pinned = re.findall(r"\(pinned by `tests/[^`]+`", DOC)
    assert len(pinned) >= 40, len(pinned)


@pytest.mark.parametrize(("chart", "value"), rows_with_chart(), ids=lambda x: str(x))
def test_every_refused_or_mapped_value_is_one_the_chart_knows(chart: str, value: str) -> None:
    assert (CHARTS / chart).is_dir(), f"no chart {chart}"
    assert Chart(chart).knows(value), f"{chart} neither has nor refuses {value!r}"


def test_the_value_tables_are_read() -> None:
    """Guards the guard: an empty or unparsed table would make the test above vacuous."""
    rows = rows_with_chart()
    assert len({c for c, _ in rows}) == 3, rows
    assert len(rows) >= 35, len(rows)


def test_every_flag_is_a_flag_of_its_command() -> None:
    problems = flag_problems(DOC, controller_flags(), subcommand_flags())
    assert not problems, f"docs/migration-from-arc.md names flags that do not exist: {problems}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_every_link_into_the_page_finds_its_heading() -> None:
    """Links within the page, and from the rest of the repository (docs, chart comments,
    flag help) to ``migration-from-arc.md#...``."""
    wanted = {(DOC_PATH.name, a) for a in re.findall(r"\]\(#([\w-]+)\)", DOC)}
    for folder in ("docs", "gharc", "charts"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".md", ".py", ".yaml", ".tpl"):
                text = path.read_text(encoding="utf-8")
                for a in re.findall(r"migration-from-arc\.md#([\w-]+)", text):
                    wanted.add((str(path.relative_to(ROOT)), a))
    have = anchors(DOC)
    broken = sorted(w for w in wanted if w[1] not in have)
    assert not broken, f"links to headings docs/migration-from-arc.md does not have: {broken}"


# --- the checks can fail -----------------------------------------------------------------


def test_a_broken_reference_of_each_kind_is_caught() -> None:
    scale_set = Chart("gharc-scale-set")
    controller = Chart("gharc-controller")
    assert not (ROOT / "tests/integration/listener/test_listener_handof.py").exists()
    assert repo_paths("(pinned by `tests/integration/listener/test_listener_handof.py`)") == [
        "tests/integration/listener/test_listener_handof.py"
    ]
    assert controller.knows("flags.releaseSessionsOnStop")
    assert not controller.knows("flags.releaseSessionOnStop")
    assert scale_set.knows("scaleset.runnerGroup")
    assert not scale_set.knows("scaleset.runnerGroups")
    assert scale_set.knows("resource.<object>.metadata")
    assert not scale_set.knows("resource.<object>.labels")
    assert not controller.knows("createDummySecret")  # a legacy chart value
    flags = controller_flags()
    others = subcommand_flags()
    assert not flag_problems("`--release-sessions-on-stop`", flags, others)
    assert flag_problems("`--release-session-on-stop`", flags, others)
    assert flag_problems("`gharc crds --groups scaleset`", flags, others)
    assert flag_problems("```sh\ngharc release \\\n  --namespaces x\n```\n", flags, others)
    assert not flag_problems("`helm upgrade --reuse-values`", flags, others)
    assert slug("Values gharc maps: ARC 0.14's experimental layout") == (
        "values-gharc-maps-arc-014s-experimental-layout"
    )
    assert "rollback-to-arc" not in anchors(DOC)
