"""The demo's (and benchmarks') report: latencies, runner thrift, API cost, and a plot.

Numbers are computed from what the outside world saw (the fake GitHub's job timestamps and
call counters, the API server's objects), not from the controller's own opinion of itself.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Sample:
    """The world at one instant of the run."""

    t: float
    queued: int
    running: int
    runners: Mapping[str, int]
    """Runner counts by phase (e.g. pending, running, finished, failed)."""


@dataclass
class JobTimes:
    queued_at: float
    started_at: float | None = None
    completed_at: float | None = None


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    data = sorted(values)
    if not data:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(data)))
    return data[min(rank, len(data)) - 1]


@dataclass
class Report:
    jobs: dict[str, JobTimes] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    runners_created: int = 0
    github_calls: dict[str, int] = field(default_factory=dict)
    kube_calls: dict[str, int] = field(default_factory=dict)
    extra: dict[str, float | int | str] = field(default_factory=dict)

    # -- derived numbers -----------------------------------------------------------------
    @property
    def pickup_latencies(self) -> list[float]:
        return [j.started_at - j.queued_at for j in self.jobs.values() if j.started_at is not None]

    @property
    def never_picked_up(self) -> list[str]:
        return sorted(k for k, j in self.jobs.items() if j.started_at is None)

    @property
    def completed(self) -> int:
        return sum(1 for j in self.jobs.values() if j.completed_at is not None)

    @property
    def runners_per_job(self) -> float:
        return self.runners_created / len(self.jobs) if self.jobs else math.nan

    @property
    def wasted_runners(self) -> int:
        """Runners that ran no job: created minus jobs started (never negative)."""
        started = sum(1 for j in self.jobs.values() if j.started_at is not None)
        return max(0, self.runners_created - started)

    def summary(self) -> dict[str, object]:
        lat = self.pickup_latencies
        n = len(self.jobs) or 1
        return {
            "jobs": len(self.jobs),
            "jobs_completed": self.completed,
            "jobs_never_picked_up": len(self.never_picked_up),
            "pickup_latency_p50_s": round(percentile(lat, 50), 3),
            "pickup_latency_p95_s": round(percentile(lat, 95), 3),
            "pickup_latency_p99_s": round(percentile(lat, 99), 3),
            "runners_created": self.runners_created,
            "runners_per_job": round(self.runners_per_job, 3),
            "wasted_runners": self.wasted_runners,
            "github_calls_total": sum(self.github_calls.values()),
            "github_calls_per_job": {
                k: round(v / n, 3) for k, v in sorted(self.github_calls.items())
            },
            "kube_calls_total": sum(self.kube_calls.values()),
            "kube_calls": dict(sorted(self.kube_calls.items())),
            **self.extra,
        }

    # -- output -------------------------------------------------------------------------
    def text(self) -> str:
        s = self.summary()
        lines = [
            f"jobs: {s['jobs']} queued, {s['jobs_completed']} completed, "
            f"{s['jobs_never_picked_up']} never picked up",
            f"pickup latency (queued -> started): p50 {s['pickup_latency_p50_s']} s, "
            f"p95 {s['pickup_latency_p95_s']} s, p99 {s['pickup_latency_p99_s']} s",
            f"runners created: {s['runners_created']} ({s['runners_per_job']} per job; "
            f"1.00 is ideal), wasted: {s['wasted_runners']}",
            f"GitHub API calls: {s['github_calls_total']} in all; per job by endpoint:",
        ]
        per_job = s["github_calls_per_job"]
        assert isinstance(per_job, dict)
        lines += [f"  {v:>8.3f}  {k}" for k, v in per_job.items()]
        lines.append(f"Kubernetes API calls by the controller: {s['kube_calls_total']}")
        kube = s["kube_calls"]
        assert isinstance(kube, dict)
        lines += [f"  {v:>8}  {k}" for k, v in kube.items()]
        for key, value in self.extra.items():
            lines.append(f"{key}: {value}")
        return "\n".join(lines)

    def plot_png(self) -> bytes:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
        ts = [s.t for s in self.samples]
        ax.plot(ts, [s.queued for s in self.samples], label="queued jobs", color="#d62728")
        ax.plot(ts, [s.running for s in self.samples], label="running jobs", color="#2ca02c")
        ax.plot(
            ts,
            [sum(s.runners.values()) for s in self.samples],
            label="runners (all phases)",
            color="#1f77b4",
        )
        ax.plot(
            ts,
            [s.runners.get("running", 0) for s in self.samples],
            label="runners running",
            color="#1f77b4",
            linestyle="--",
        )
        ax.set_xlabel("seconds since start")
        ax.set_ylabel("count")
        ax.set_title("gharc demo: queue, jobs and runners over time")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return buf.getvalue()

    def html_page(self, png: bytes) -> str:
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td><pre>{html.escape(json.dumps(v, indent=1))}"
            "</pre></td></tr>"
            for k, v in self.summary().items()
        )
        img = base64.b64encode(png).decode()
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>gharc demo report</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
            "th{text-align:left;padding-right:1em;vertical-align:top}pre{margin:0}</style>"
            "</head><body><h1>gharc demo report</h1>"
            f"<img alt='queue, jobs and runners over time' src='data:image/png;base64,{img}'>"
            f"<table>{rows}</table></body></html>"
        )

    def write(self, out_dir: Path) -> dict[str, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        png = self.plot_png()
        paths = {
            "png": out_dir / "report.png",
            "html": out_dir / "report.html",
            "json": out_dir / "report.json",
        }
        paths["png"].write_bytes(png)
        paths["html"].write_text(self.html_page(png))
        paths["json"].write_text(
            json.dumps(
                {
                    "summary": self.summary(),
                    "samples": [asdict(s) for s in self.samples],
                },
                indent=1,
            )
        )
        return paths


def github_calls(call_table: Mapping[tuple[str, str, int], int]) -> dict[str, int]:
    """The fake GitHub's call table as {"METHOD route": n}, without its control (``/_fake``)
    and simulated-runner (``/_runner``) routes: what the system under test spent of a real
    GitHub's API, which the demo and the benchmark report the same way."""
    calls: dict[str, int] = {}
    for (method, route, _status), n in call_table.items():
        if not route.startswith(("/_fake", "/_runner")):
            calls[f"{method} {route}"] = calls.get(f"{method} {route}", 0) + n
    return calls


def job_times(jobs: Mapping[int, object]) -> dict[str, JobTimes]:
    """The fake GitHub's jobs (request id -> ``Job``) as :class:`JobTimes` relative to the
    first queue time, so a report (demo, bench, e2e test) is computed one way everywhere."""
    first = min((float(getattr(j, "queue_time", 0.0)) for j in jobs.values()), default=0.0)

    def rel(value: object) -> float | None:
        return float(value) - first if isinstance(value, int | float) and value else None

    return {
        str(rid): JobTimes(
            queued_at=float(getattr(job, "queue_time", 0.0)) - first,
            started_at=rel(getattr(job, "start_time", None)),
            completed_at=rel(getattr(job, "finish_time", None)),
        )
        for rid, job in jobs.items()
    }
