"""Prometheus metrics for every HTTP call to GitHub (B6: quota is a resource to watch).

Labels use route templates (``/_apis/runtime/runnerscalesets/{id}``), never raw ids, so the
series count stays bounded. Pass a ``CollectorRegistry`` to keep tests isolated; without one
the process-wide default registry is used, once.
"""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class GitHubMetrics:
    """The three collectors, registered on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else REGISTRY
        self.requests = Counter(
            "gharc_github_api_requests",
            "HTTP requests sent to GitHub REST and the Actions service.",
            ["endpoint", "method", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "gharc_github_api_request_duration_seconds",
            "Duration of HTTP requests to GitHub, long polls included.",
            ["endpoint", "method"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.rate_limit_remaining = Gauge(
            "gharc_github_rate_limit_remaining",
            "X-RateLimit-Remaining of the last REST response, per scope.",
            ["scope"],
            registry=registry,
        )

        self._children: dict[tuple[str, str, int | str], tuple[Counter, Histogram]] = {}
        """Labelled children by (endpoint, method, status): a listener observes the same few
        every request, and ``labels()`` validates and sorts its arguments on each call."""

    def observe(self, endpoint: str, method: str, status: int | str, seconds: float) -> None:
        key = (endpoint, method, status)
        children = self._children.get(key)
        if children is None:
            children = (
                self.requests.labels(endpoint=endpoint, method=method, status=str(status)),
                self.duration.labels(endpoint=endpoint, method=method),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def count(self, endpoint: str, method: str, status: int | str) -> float:
        """Current counter value (for tests and debugging)."""
        return self.requests.labels(
            endpoint=endpoint, method=method, status=str(status)
        )._value.get()


_default: GitHubMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> GitHubMetrics:
    """The process-wide instance on the default registry (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = GitHubMetrics()
        return _default
