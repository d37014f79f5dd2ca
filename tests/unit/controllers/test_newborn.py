"""A runner is registered without reads only on the very first attempt, whatever the order
of the set's create answer and the runner's first reconcile."""

from __future__ import annotations

from gharc.controllers.scaleset.newborn import Newborn


def test_added_then_taken_once() -> None:
    born = Newborn()
    born.add("u1")
    assert born.take("u1") is True
    assert born.take("u1") is False


def test_a_runner_reconciled_before_the_create_answer_is_not_newborn_later() -> None:
    born = Newborn()
    assert born.take("u1") is False  # its add event came first: the normal path ran
    born.add("u1")  # the set's create call returns
    assert born.take("u1") is False, "a second first registration for the same runner"
