"""The chaos suite's harness: faults injected into a running World, and the per-case table.

``tests/chaos`` runs the cases at :data:`~testworld.chaos.cases.SMALL` sizes in the
normal test run; ``bench/chaos.py`` runs them bigger. See :mod:`.cases` and
:mod:`.incidents`, :mod:`.disruptions` and :mod:`.jit_errors`.
"""

from testworld.chaos.cases import BIG, CASES, SMALL, Sizes
from testworld.chaos.disruptions import DISRUPTIONS
from testworld.chaos.hostile_metrics import HOSTILE_METRICS
from testworld.chaos.incidents import INCIDENTS
from testworld.chaos.jit_errors import JIT_ERRORS
from testworld.chaos.legacy import LEGACY_CASES
from testworld.chaos.report import CaseResult, problems, table
from testworld.chaos.shards import SHARD_CASES
from testworld.chaos.tenants import TENANTS

CASES.update(INCIDENTS)  # GitHub's own incidents (issue 19 §6), in the same table and bench
CASES.update(DISRUPTIONS)  # evictions and a scale set deleted mid-run
CASES.update(JIT_ERRORS)  # JIT configs failing while the other endpoints answer
CASES.update(HOSTILE_METRICS)  # one tenant's metrics config against the shared controller
CASES.update(TENANTS)  # a tenant's schedule, a frozen leader (issue 26)
CASES.update(SHARD_CASES)  # replicas sharing the scale sets out (--shards)
CASES.update(LEGACY_CASES)  # legacy mode: the webhook server killed mid-burst

__all__ = ["BIG", "CASES", "SMALL", "CaseResult", "Sizes", "problems", "table"]
