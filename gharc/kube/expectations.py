"""Expectations: what a controller just created or deleted that its cache does not show yet.

Reconciles read the informer cache, and the event that triggers the next reconcile often
arrives before the cache holds the object the previous reconcile created (our own status
write wakes us faster than the pod's watch event reaches us). Acting on that stale view
means a second create (answered 409 AlreadyExists, then a requeue) or, for counted
children, a surplus object. Kubernetes' ReplicaSet controller keeps "expectations" for
this; so do we, the same way for every controller:

* after a create, ``expect_create(owner, name, uid)``; a reconcile that does not find the
  object in the cache asks :meth:`pending_create` and waits for the add event instead;
* after a delete, ``expect_delete(owner, name)``; the object counts as going away even
  while the cache still shows it alive;
* :meth:`observe` settles both from what the cache shows (by uid when one was given, so a
  replaced object of the same name does not settle its successor's expectation);
* every expectation lapses after ``ttl``: a create the cache never shows (the object was
  deleted at once) must not block the owner forever.

Owners are opaque strings (usually the owner's uid); names are the children's names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["DEFAULT_TTL", "Expectations"]

#: How long a create or delete of ours is assumed to be on its way to the cache.
DEFAULT_TTL = 30.0


@dataclass(slots=True)
class _Owner:
    created: dict[str, tuple[str, float]] = field(default_factory=dict)
    """name -> (uid or "", deadline)"""
    deleted: dict[str, float] = field(default_factory=dict)
    """name -> deadline"""


class Expectations:
    """Per-owner expected creations and deletions (see the module docstring)."""

    def __init__(
        self, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.clock = clock
        self._owners: dict[str, _Owner] = {}

    def _owner(self, owner: str) -> _Owner:
        found = self._owners.get(owner)
        if found is None:
            found = self._owners[owner] = _Owner()
        return found

    def _expire(self, owner: str) -> _Owner | None:
        found = self._owners.get(owner)
        if found is None:
            return None
        now = self.clock()
        for name in [n for n, (_, d) in found.created.items() if d < now]:
            del found.created[name]
        for name in [n for n, d in found.deleted.items() if d < now]:
            del found.deleted[name]
        if not found.created and not found.deleted:
            del self._owners[owner]
            return None
        return found

    # -- recording ------------------------------------------------------------------------
    def expect_create(self, owner: str, name: str, uid: str = "") -> None:
        self._owner(owner).created[name] = (uid, self.clock() + self.ttl)

    def expect_delete(self, owner: str, name: str) -> None:
        entry = self._owner(owner)
        entry.created.pop(name, None)
        entry.deleted[name] = self.clock() + self.ttl

    def forget(self, owner: str) -> None:
        self._owners.pop(owner, None)

    # -- settling -------------------------------------------------------------------------
    def observe(
        self,
        owner: str,
        present: Mapping[str, str] | Iterable[str],
        *,
        deleting: Iterable[str] = (),
    ) -> None:
        """Settle from the cache: ``present`` are the children it shows (name -> uid, or
        just names), ``deleting`` those of them that carry a deletionTimestamp."""
        entry = self._expire(owner)
        if entry is None:
            return
        uids = present if isinstance(present, Mapping) else dict.fromkeys(present, "")
        for name, (uid, _) in list(entry.created.items()):
            if name in uids and (not uid or not uids[name] or uids[name] == uid):
                del entry.created[name]
        gone = set(deleting)
        for name in list(entry.deleted):
            if name in gone or name not in uids:
                del entry.deleted[name]
        if not entry.created and not entry.deleted:
            self._owners.pop(owner, None)

    # -- questions ------------------------------------------------------------------------
    def pending_create(self, owner: str, name: str) -> float | None:
        """Seconds left on the create of ``name`` we are waiting to see; None if none."""
        entry = self._expire(owner)
        if entry is None or name not in entry.created:
            return None
        return max(0.0, entry.created[name][1] - self.clock())

    def pending_creates(self, owner: str) -> int:
        entry = self._expire(owner)
        return len(entry.created) if entry is not None else 0

    def lapses_in(self, owner: str) -> float | None:
        """Seconds until the first of ``owner``'s expectations lapses: the bound of a wait for
        the cache, since the add event that settles it normally comes much sooner."""
        entry = self._expire(owner)
        if entry is None:
            return None
        deadlines = [d for _, d in entry.created.values()] + list(entry.deleted.values())
        return max(0.0, min(deadlines) - self.clock())

    def pending_deletes(self, owner: str) -> frozenset[str]:
        entry = self._expire(owner)
        return frozenset(entry.deleted) if entry is not None else frozenset()

    def __len__(self) -> int:
        return len(self._owners)
