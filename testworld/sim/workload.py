"""Workloads for the demo and the benchmarks: bursts of jobs and a steady trickle.

A workload is a schedule fixed up front from a seed, so two runs (or gharc and another
controller) can be compared on exactly the same arrivals.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobArrival:
    """One job: when it is queued (seconds from the start), how long it runs, its result."""

    at: float
    duration: float
    result: str = "succeeded"
    labels: tuple[str, ...] = ()
    repository: str = "demo"
    workflow: str = "ci.yml"


@dataclass(frozen=True)
class Burst:
    """``jobs`` jobs queued together ``at`` seconds into the run."""

    at: float
    jobs: int


@dataclass
class Workload:
    """A configurable mix of bursts and a Poisson trickle.

    ``trickle_per_minute`` jobs arrive at random (exponential gaps) between 0 and
    ``trickle_seconds``; job durations are uniform in ``job_seconds``; ``failure_rate`` of the
    jobs end ``failed``.
    """

    bursts: list[Burst] = field(default_factory=lambda: [Burst(0.0, 20), Burst(40.0, 30)])
    trickle_per_minute: float = 30.0
    trickle_seconds: float = 60.0
    job_seconds: tuple[float, float] = (2.0, 8.0)
    failure_rate: float = 0.05
    labels: tuple[str, ...] = ()
    seed: int = 42

    def arrivals(self) -> list[JobArrival]:
        rng = random.Random(self.seed)
        times: list[float] = []
        for burst in self.bursts:
            times.extend([burst.at] * burst.jobs)
        if self.trickle_per_minute > 0:
            t = 0.0
            rate = self.trickle_per_minute / 60.0
            while True:
                t += rng.expovariate(rate)
                if t >= self.trickle_seconds:
                    break
                times.append(t)
        out = []
        for i, at in enumerate(sorted(times)):
            lo, hi = self.job_seconds
            out.append(
                JobArrival(
                    at=round(at, 3),
                    duration=round(rng.uniform(lo, hi), 3),
                    result="failed" if rng.random() < self.failure_rate else "succeeded",
                    labels=self.labels,
                    repository=f"repo-{i % 5}",
                )
            )
        return out

    @classmethod
    def parse(cls, text: str, **kwargs: object) -> Workload:
        """Build from a compact spec: ``"burst=0:20,burst=40:30,trickle=30/60,jobs=2-8"``."""
        bursts: list[Burst] = []
        opts: dict[str, object] = dict(kwargs)
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = part.partition("=")
            if key == "burst":
                at, _, n = value.partition(":")
                bursts.append(Burst(float(at), int(n)))
            elif key == "trickle":
                rate, _, secs = value.partition("/")
                opts["trickle_per_minute"] = float(rate)
                opts["trickle_seconds"] = float(secs or 60)
            elif key == "jobs":
                lo, _, hi = value.partition("-")
                opts["job_seconds"] = (float(lo), float(hi or lo))
            elif key == "failures":
                opts["failure_rate"] = float(value)
            elif key == "seed":
                opts["seed"] = int(value)
            else:
                raise ValueError(
                    f"unknown workload item {part!r}: use burst=AT:N, trickle=PER_MIN/SECONDS, "
                    "jobs=MIN-MAX, failures=RATE, seed=N"
                )
        return cls(bursts=bursts, **opts)  # type: ignore[arg-type]
