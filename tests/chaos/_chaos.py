"""The type of the ``run_case`` fixture (see conftest.py), for the chaos tests to annotate."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gharc.testing.chaos import CaseResult
from gharc.testing.worlds import WorldFactory

#: A case of :mod:`gharc.testing.chaos.cases`: a world factory and a namespace to a result.
Case = Callable[[WorldFactory, str], Awaitable[CaseResult]]
#: Runs a case in a namespace, records it for the table and fails on its problems.
RunCase = Callable[[Case, str], Awaitable[CaseResult]]
