"""Which of a RunnerDeployment's replica sets is the current one."""

from __future__ import annotations

from typing import Any

from gharc.api.legacy import constants as c
from gharc.controllers.legacy.runnerdeployment import split_new_and_old


def replica_set(name: str, template_hash: str, created: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {c.LABEL_RUNNER_TEMPLATE_HASH: template_hash},
        }
    }


def test_the_set_of_the_current_template_is_new_even_if_an_old_one_sorts_first() -> None:
    """Both made in the same second; the old one's name sorts after the new one's, so it
    comes first in newest-first order. Taken as the newest, it made the controller create
    another set of the new template on every reconcile of that second."""
    old = replica_set("rd-rscc5", "old", "2026-12-06T13:34:53Z")
    new = replica_set("rd-5nflj", "new", "2026-12-06T13:34:53Z")
    newest, others = split_new_and_old([old, new], "new")
    assert newest is new and others == [old]


def test_no_set_of_the_current_template_means_one_is_made() -> None:
    old = replica_set("rd-rscc5", "old", "2026-12-06T13:34:53Z")
    newest, others = split_new_and_old([old], "new")
    assert newest is None and others == [old]


def test_of_two_sets_of_the_current_template_the_first_is_kept_and_the_other_is_old() -> None:
    later = replica_set("rd-b", "new", "2026-12-06T13:34:54Z")
    earlier = replica_set("rd-a", "new", "2026-12-06T13:34:53Z")
    newest, others = split_new_and_old([later, earlier], "new")
    assert newest is later and others == [earlier]
