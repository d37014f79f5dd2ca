"""The part of a manager that the controllers' ``setup`` functions use, for tests that start
the controllers themselves (no leader election, no metrics or health servers)."""

from __future__ import annotations

from typing import Any

from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient


class SetupManager:
    """A client, a cache, and the runnables ``setup`` adds, for the test to start and stop."""

    def __init__(self, client: KubeClient, cache: Cache) -> None:
        self.client = client
        self.cache = cache
        self.runnables: list[Any] = []

    def add(self, runnable: Any) -> None:
        self.runnables.append(runnable)
