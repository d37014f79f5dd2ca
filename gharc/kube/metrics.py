"""Prometheus metrics of the controller core, under controller-runtime's names.

Dashboards and alerts written for controller-runtime operators (reconcile rate, error
ratio, queue depth) work unchanged on gharc. All live in the default registry, which the
manager's ``/metrics`` endpoint serves; label values are bounded (controller names, verbs,
resource plurals, status codes), never object names.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "ACTIVE_WORKERS",
    "API_REQUESTS",
    "API_REQUESTS_BY_CALLER",
    "API_REQUEST_DURATION",
    "EVENT_LOOP_LAG",
    "FENCED_WRITES",
    "LEADER_ELECTION_MASTER_STATUS",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_ERRORS",
    "RECONCILE_PANICS",
    "RECONCILE_TIME",
    "RECONCILE_TOTAL",
    "REST_CLIENT_REQUESTS",
    "REST_CLIENT_REQUEST_DURATION",
    "TERMINAL_RECONCILE_ERRORS",
    "WORKQUEUE_ADDS",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING",
    "WORKQUEUE_QUEUE_DURATION",
    "WORKQUEUE_RETRIES",
    "WORKQUEUE_UNFINISHED_WORK",
    "WORKQUEUE_WORK_DURATION",
]

_QUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
_RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)

API_REQUESTS = Counter(
    "gharc_kube_api_requests_total",
    "Kubernetes API requests by verb, resource and HTTP status code ('error' when no answer).",
    ["verb", "resource", "code"],
)
API_REQUESTS_BY_CALLER = Counter(
    "gharc_kube_api_requests_by_caller_total",
    "The part of gharc_kube_api_requests_total made through a tagged client view (e.g. the "
    "in-process listeners' patches), by caller, verb and resource.",
    ["caller", "verb", "resource"],
)
API_REQUEST_DURATION = Histogram(
    "gharc_kube_api_request_duration_seconds",
    "Latency of Kubernetes API requests (until headers for watches).",
    ["verb", "resource"],
)

# client-go's names, which dashboards written for controller-runtime operators query; the
# labels are client-go's too: the HTTP method and the API server's host.
REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
REST_CLIENT_REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=_RECONCILE_BUCKETS,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
)

WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name", "controller"])
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["name", "controller"]
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name", "controller"],
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
)

WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases.",
    ["name", "controller"],
)
WORKQUEUE_LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
)

LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
)

FENCED_WRITES = Counter(
    "gharc_leader_fenced_writes_total",
    "Writes (create, update, patch, delete; and GitHub calls that change something there) "
    "not sent because this replica could no longer prove it holds the leader Lease.",
)

EVENT_LOOP_LAG = Histogram(
    "gharc_event_loop_lag_seconds",
    "How late the controller's event loop ran a timer: the time one piece of work held the "
    "loop that every scale set's reconciles and listeners share.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
