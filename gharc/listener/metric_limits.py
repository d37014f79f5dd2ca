"""Bounds on what one scale set's listener metrics may cost the process that serves them.

``listenerMetrics`` is written by whoever owns an AutoscalingRunnerSet, and every in-process
listener lives in the controller: histogram buckets, label values (job names, repositories,
workflow refs come from the tenant's workflows) and series are all the controller's memory
and scrape time. Measured before these bounds (issue 26): 20,000 buckets and a dozen job
names made 720,192 samples, 139 MiB and a 25 s scrape, long enough for the leader to lose
its Lease. Each bound is per scale set, so one tenant's config costs at most
``series`` samples whatever it says; a bound reached is folded, not refused, so the
listener keeps scaling, and it is said once (a log line, and an event where a recorder is
reachable).

Plain constants and a small dataclass: the listener process imports this module, and
neither prometheus_client nor the controller's settings come with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "MAX_HISTOGRAM_BUCKETS",
    "MAX_LABEL_VALUES",
    "MAX_SERIES",
    "OTHER",
    "MetricLimits",
    "SeriesBudget",
    "capped_buckets",
]

MAX_HISTOGRAM_BUCKETS = 64
"""Buckets kept per histogram. ARC's defaults are 45; every bucket is a sample of every
label combination, so 20,000 buckets made one job name cost 11.6 MiB. Beyond this the first
64 are kept: the low end is where a tenant's choice of resolution usually matters."""

MAX_LABEL_VALUES = 100
"""Distinct values kept per label per scale set (job names, repositories, workflow refs,
events, results); further values are counted under :data:`OTHER`. 100 job names fit the
dashboards ARC users build; a workflow generating a name per run no longer grows memory."""

MAX_SERIES = 10_000
"""Samples one scale set's metrics may have (a histogram child costs its buckets, +Inf,
``_count``, ``_sum`` and ``_created``). ARC's default metrics with 100 job names need about
15,000; 10,000 keep a scale set's scrape near 0.3 s and its memory near 2 MiB (measured:
about 210 bytes and 30-55 us per sample). A new label combination beyond it is counted in
the metric's one overflow child, whose labels other than the scale set's are :data:`OTHER`."""

OTHER = "other"
"""The label value that stands for every value beyond a bound."""

#: Labels that name the scale set itself: one value per listener, never folded.
SCALE_SET_LABELS = frozenset({"name", "namespace"})


@dataclass(frozen=True)
class MetricLimits:
    """The three bounds of one listener (``--listener-metrics-max-*`` in the controller)."""

    buckets: int = MAX_HISTOGRAM_BUCKETS
    label_values: int = MAX_LABEL_VALUES
    series: int = MAX_SERIES


def capped_buckets(buckets: Sequence[float], limit: int) -> list[float]:
    """The first ``limit`` of ``buckets`` (all of them when within the limit)."""
    return list(buckets[: max(1, limit)])


@dataclass
class SeriesBudget:
    """Label values and samples one scale set has spent, shared by all its metrics.

    ``report(kind, message)`` is called when a bound is first reached; the caller says it
    once per ``kind``.
    """

    limits: MetricLimits
    report: Callable[[str, str], None]
    spent: int = 0
    values: dict[str, set[str]] = field(default_factory=dict)

    def fold(self, labels: Sequence[str], key: tuple[str, ...]) -> tuple[str, ...]:
        """``key`` with each value beyond its label's bound replaced by :data:`OTHER`."""
        out = list(key)
        for i, (label, value) in enumerate(zip(labels, key, strict=True)):
            if label in SCALE_SET_LABELS:
                continue
            seen = self.values.setdefault(label, set())
            if value in seen:
                continue
            if len(seen) < self.limits.label_values:
                seen.add(value)
                continue
            out[i] = OTHER
            self.report(
                f"labels:{label}",
                f"label {label!r} reached {self.limits.label_values} distinct values; "
                f"further values are counted as {OTHER!r}",
            )
        return tuple(out)

    def admit(self, cost: int) -> bool:
        """Whether a new child of ``cost`` samples fits; spends it when it does."""
        if self.spent + cost <= self.limits.series:
            self.spent += cost
            return True
        self.report(
            "series",
            f"metrics reached {self.limits.series} samples; new label combinations are "
            f"counted with labels {OTHER!r}",
        )
        return False


def overflow_key(labels: Sequence[str], values: Mapping[str, str]) -> tuple[str, ...]:
    """The one child a metric counts everything beyond the series bound in."""
    return tuple(values.get(k, "") if k in SCALE_SET_LABELS else OTHER for k in labels)
