"""The flag tables of docs/configuration.md, generated from the settings declarations.

Why generated: a flag's help, default and env var are declared once, in its process'
settings dataclass; a hand-kept table drifts from that. ``python -m testworld.flagdocs``
rewrites each table between its ``<!-- flags: PROCESS -->`` and ``<!-- end flags -->``
markers; ``tests/unit/settings`` fails while the file differs from what this writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gharc.settings.declare import flag_table

__all__ = ["DOC", "processes", "render"]

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_SECTION = re.compile(
    r"(<!-- flags: (?P<name>[^>]+?) -->\n)(?P<body>.*?)(<!-- end flags -->)", re.S
)


def processes() -> dict[str, type]:
    """Each command with flags -> its settings dataclass."""
    from gharc.controllers.settings import ControllerSettings
    from gharc.webhook.settings import WebhookSettings

    return {"gharc controller": ControllerSettings, "gharc webhook-server": WebhookSettings}


def render(text: str) -> str:
    """``text`` with every flag table replaced by the one the declarations give."""
    known = processes()

    def table(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in known:
            raise KeyError(f"docs name flags of {name!r}, which has no settings declaration")
        return f"{match.group(1)}{flag_table(known[name])}{match.group(4)}"

    return _SECTION.sub(table, text)


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
