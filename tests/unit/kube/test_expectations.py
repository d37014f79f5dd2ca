"""gharc.kube.expectations: creations and deletions the cache does not show yet."""

from __future__ import annotations

from gharc.kube.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_create_is_pending_until_the_cache_shows_that_object() -> None:
    clock = Clock()
    e = Expectations(ttl=30, clock=clock)
    e.expect_create("owner", "pod", uid="u2")
    assert e.pending_create("owner", "pod") == 30
    e.observe("owner", {"pod": "u1"})  # the old pod of the same name: not ours
    assert e.pending_creates("owner") == 1
    e.observe("owner", {"pod": "u2"})
    assert e.pending_create("owner", "pod") is None
    assert len(e) == 0


def test_expectations_lapse_after_the_ttl() -> None:
    clock = Clock()
    e = Expectations(ttl=30, clock=clock)
    e.expect_create("o", "a")
    e.expect_delete("o", "b")
    clock.t += 31
    assert e.pending_creates("o") == 0
    assert e.pending_deletes("o") == frozenset()


def test_delete_is_pending_until_the_cache_shows_it_deleting_or_gone() -> None:
    e = Expectations()
    e.expect_delete("o", "a")
    e.expect_delete("o", "b")
    e.observe("o", ["a", "b"], deleting=["a"])
    assert e.pending_deletes("o") == {"b"}
    e.observe("o", [])
    assert e.pending_deletes("o") == frozenset()


def test_lapses_in_bounds_the_wait_by_the_first_expectation_to_lapse() -> None:
    clock = Clock()
    e = Expectations(ttl=30, clock=clock)
    assert e.lapses_in("rd") is None
    e.expect_create("rd", "a", "uid-a")
    clock.t += 10
    e.expect_delete("rd", "b")
    assert e.lapses_in("rd") == 20
    e.observe("rd", {"a": "uid-a", "b": "uid-b"})
    assert e.lapses_in("rd") == 30, "a settled; b's delete is still on its way"
    clock.t += 31
    assert e.lapses_in("rd") is None
