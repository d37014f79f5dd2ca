"""One row per chaos case, and the table they make.

The columns are issue 19's: jobs submitted / done / never given a runner, runners per job,
orphan registrations (runners still registered at GitHub with no EphemeralRunner behind
them), leftovers (runner pods, Secrets and EphemeralRunners still there after the drain) and
the time from the fault to the service working again. A case passes only with 0 jobs never
given a runner and 0 orphans; the table is printed either way so that a failing run shows
what it saw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Issue 19's bar for cases whose fault spends registrations of its own.
MAX_RUNNERS_PER_JOB = 1.05

COLUMNS = (
    ("case", 24),
    ("submitted", 9),
    ("done", 5),
    ("no runner", 9),
    ("runners/job", 11),
    ("orphans", 7),
    ("leftovers", 9),
    ("recover s", 9),
)


@dataclass
class CaseResult:
    """What one chaos case saw; ``extra`` holds the case's own counters (409s, failures)."""

    case: str
    submitted: int = 0
    done: int = 0
    never_got_runner: int = 0
    runners_created: int = 0
    orphans: int = 0
    leftovers: int = 0
    recover_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Registrations the fault itself spends (a pod lost after its runner redeemed its
    #: single-use JIT config): each one a new runner or the same runner registered afresh
    #: under its name; allowed on top of one runner per job, as long as runners per job
    #: stays within MAX_RUNNERS_PER_JOB.
    allowed_extra_runners: int = 0
    #: Runners registered a second time under the same name: a fresh registration after a
    #: used config (within ``allowed_extra_runners``), or one whose first answer was lost
    #: with the controller that asked (``allowed_replaced_registrations``, where the case
    #: can explain each). One runner still, so not in ``runners_created``.
    registrations_replaced: int = 0
    allowed_replaced_registrations: int = 0
    #: The bar on registrations per job when the fault spends some; a case whose fault
    #: costs more by design (lost webhook deliveries) sets its own and says why.
    max_runners_per_job: float = MAX_RUNNERS_PER_JOB

    @property
    def runners_per_job(self) -> float:
        return self.runners_created / self.submitted if self.submitted else 0.0

    def row(self) -> str:
        recover = "-" if self.recover_seconds is None else f"{self.recover_seconds:.1f}"
        cells = (
            self.case,
            str(self.submitted),
            str(self.done),
            str(self.never_got_runner),
            f"{self.runners_per_job:.2f}",
            str(self.orphans),
            str(self.leftovers),
            recover,
        )
        return "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS, strict=True))
        )

    def details(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.extra.items()))


def problems(result: CaseResult) -> list[str]:
    """What keeps ``result`` from issue 19's bar: every job done, each on exactly one runner
    of its own, no orphan registration, nothing left behind. Empty when it passes."""
    out = []
    if result.never_got_runner:
        out.append(f"{result.never_got_runner} jobs never got a runner")
    if result.done != result.submitted:
        out.append(f"{result.submitted - result.done} of {result.submitted} jobs not done")
    unexplained = max(0, result.registrations_replaced - result.allowed_replaced_registrations)
    spent = result.runners_created - result.submitted + unexplained
    registrations = result.runners_created + result.registrations_replaced
    if (
        result.runners_created < result.submitted
        or spent > result.allowed_extra_runners
        or (
            result.allowed_extra_runners
            and result.submitted
            and registrations / result.submitted > result.max_runners_per_job
        )
    ):
        out.append(
            f"{result.runners_created} runners created for {result.submitted} jobs, "
            f"{result.registrations_replaced} registered twice "
            f"({result.allowed_extra_runners} extra and "
            f"{result.allowed_replaced_registrations} replaced explained by the fault)"
        )
    if result.orphans:
        out.append(f"{result.orphans} orphan registrations")
    if result.leftovers:
        named = result.extra.get("leftover", "")
        out.append(f"{result.leftovers} leftover runner objects {named}".rstrip())
    return out


def table(results: Iterable[CaseResult]) -> str:
    """The per-case table, with each case's own counters on the line below its row."""
    head = "  ".join(n.rjust(w) if i else n.ljust(w) for i, (n, w) in enumerate(COLUMNS))
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(r.row())
        if r.extra:
            lines.append(f"    {r.details()}")
    return "\n".join(lines)
