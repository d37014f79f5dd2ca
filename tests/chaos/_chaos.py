"""The type of the ``run_case`` fixture (see conftest.py), for the chaos tests to annotate."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from testworld.chaos import CaseResult
from testworld.worlds import WorldFactory

#: A case of :mod:`testworld.chaos.cases`: a world factory and a namespace to a result.
Case = Callable[[WorldFactory, str], Awaitable[CaseResult]]
#: Runs a case in a namespace, records it for the table and fails on its problems.
RunCase = Callable[[Case, str], Awaitable[CaseResult]]
