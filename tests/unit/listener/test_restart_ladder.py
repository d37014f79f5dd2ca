"""B1's ladder has one home: both listener modes and the documentation read the same steps."""

from __future__ import annotations

import re
from pathlib import Path

from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.listener.host import ListenerHost
from gharc.listener.restart_ladder import LISTENER_RESTART_LADDER, restart_delay

BEHAVIOURS = Path(__file__).resolve().parents[3] / "docs" / "behaviours.md"


def test_pod_and_in_process_listeners_back_off_alike() -> None:
    """The in-process host once defaulted to a ladder capped at 80 s while listener pods
    were capped at 160 s: a listener's backoff depended on its mode."""
    host = ListenerHost(object(), identity="controller-0")
    pods = ScaleSetOptions(controller_namespace="gharc-system").listener_failure_backoff
    assert host.ladder == pods == LISTENER_RESTART_LADDER


def test_the_ladder_is_the_one_the_documentation_states() -> None:
    section = BEHAVIOURS.read_text(encoding="utf-8").split("## B1", 1)[1].split("\n## ", 1)[0]
    stated = re.search(r"has passed: ([0-9, ]+), then (\d+) s", section)
    assert stated, "docs/behaviours.md B1 no longer states the ladder's steps"
    steps = [float(x) for x in stated.group(1).split(",")] + [float(stated.group(2))]
    assert tuple(steps) == LISTENER_RESTART_LADDER


def test_delay_before_the_first_failure_is_none_and_the_last_step_caps() -> None:
    assert restart_delay(0) == 0.0
    assert restart_delay(1) == 5.0
    assert restart_delay(len(LISTENER_RESTART_LADDER) + 5) == LISTENER_RESTART_LADDER[-1]
    assert restart_delay(3, ()) == 0.0
