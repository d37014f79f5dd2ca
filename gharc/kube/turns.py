"""Items queued by key and handed out in turn across keys, first in first out within one.

The work queue (ready keys, by namespace) and the client's rate limit (requests waiting for
a token, by namespace) both need it: one tenant's 400 items must delay another tenant's
next item by one turn, not by 400. Hand-written: the standard library has no round-robin
queue of queues.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["TurnQueue"]

T = TypeVar("T")


class TurnQueue(Generic[T]):
    def __init__(self) -> None:
        self._by_key: dict[Hashable, deque[T]] = {}
        self._turns: deque[Hashable] = deque()
        """Keys that hold items, in the order their turns come."""
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def push(self, key: Hashable, item: T) -> None:
        queue = self._by_key.get(key)
        if queue is None:
            queue = self._by_key[key] = deque()
            self._turns.append(key)
        queue.append(item)
        self._count += 1

    def pop_first(self, eligible: Callable[[Hashable], bool]) -> T | None:
        """The oldest item of the first key in turn that is ``eligible``; ``None`` if no key
        is. Keys passed over keep their place in the turns."""
        for index, key in enumerate(self._turns):
            if eligible(key):
                del self._turns[index]
                self._turns.appendleft(key)
                return self.pop()
        return None

    def pop(self) -> T:
        """The next key's oldest item; raises IndexError when empty."""
        key = self._turns.popleft()
        queue = self._by_key[key]
        item = queue.popleft()
        if queue:
            self._turns.append(key)  # its next item waits for every other key's turn
        else:
            del self._by_key[key]
        self._count -= 1
        return item
