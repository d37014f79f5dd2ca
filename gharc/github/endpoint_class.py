"""Endpoint classes: which calls to GitHub share a circuit breaker.

A host can fail one endpoint while answering the others: the Actions service answered
``generatejitconfig`` with 503 for minutes while the listeners' message polls and
statistics reads went through. One breaker per (host, credential) closed on each of those
successes and reopened after the next JIT failures, every 2 s: 111 JIT config calls in 30 s
of 503s. So each class below has its own breaker; the classes follow the clients' endpoint
templates (:mod:`gharc.github.actions`, :mod:`gharc.github.rest`), one per kind of work
that fails or recovers on its own at GitHub.

Which *service* a call goes to matters for rate limits: the REST API and the Actions
service (``/_apis/...`` and the message queue) limit a credential separately
(:mod:`gharc.github.budget`).
"""

from __future__ import annotations

from enum import StrEnum


class EndpointClass(StrEnum):
    """The breaker a call goes through; the value is the metrics label."""

    JIT_CONFIG = "jit_config"
    ACQUIRE = "acquire"
    """Job acquisition and the acquirable-jobs list."""
    MESSAGE = "message"
    """The listener's message queue: the long poll and message deletion."""
    SESSION = "session"
    STATISTICS = "statistics"
    """A scale set read by id: the listener's statistics, the reconciler's existence check."""
    REGISTRATION = "registration"
    """REST registration tokens and their exchange for the Actions service's admin token."""
    OTHER = "other"


#: The classes that start runners or take jobs: they probe a recovering host first.
PRIORITY_CLASSES = frozenset({EndpointClass.JIT_CONFIG, EndpointClass.ACQUIRE})

_SCALE_SET_BY_ID = "/_apis/runtime/runnerscalesets/{id}"
_TOKEN_EXCHANGE = "/access_tokens"
"""A GitHub App's installation token: a credential, like the registration classes."""
_SUFFIXES = (
    ("/generatejitconfig", EndpointClass.JIT_CONFIG),
    ("/acquirejobs", EndpointClass.ACQUIRE),
    ("/acquirablejobs", EndpointClass.ACQUIRE),
    ("/sessions", EndpointClass.SESSION),
    ("/sessions/{session_id}", EndpointClass.SESSION),
    ("/registration-token", EndpointClass.REGISTRATION),
    ("/actions/runner-registration", EndpointClass.REGISTRATION),
)


def class_of(method: str, endpoint: str) -> EndpointClass:
    """The class of one call, from its method and endpoint template (as the clients name
    it for metrics)."""
    if endpoint.startswith("{messageQueueUrl}"):
        return EndpointClass.MESSAGE
    if endpoint == _SCALE_SET_BY_ID and method.upper() == "GET":
        return EndpointClass.STATISTICS
    for suffix, klass in _SUFFIXES:
        if endpoint.endswith(suffix):
            return klass
    return EndpointClass.OTHER


def changes_github(method: str, endpoint: str) -> bool:
    """Whether a call changes what GitHub holds for a scale set (a registration, a job, a
    message, a session, the scale set itself) rather than reading, or exchanging one
    credential for another: the calls a controller replica that lost its Lease must not
    send (:class:`~gharc.github.transport.Sender`'s ``write_gate``)."""
    if method.upper() in ("GET", "HEAD"):
        return False
    if endpoint.endswith(_TOKEN_EXCHANGE):
        return False
    return class_of(method, endpoint) is not EndpointClass.REGISTRATION


def is_actions_service(endpoint: str) -> bool:
    """Whether the call goes to the Actions service (another service than REST, with
    limits of its own)."""
    return endpoint.startswith("/_apis/") or "{messageQueueUrl}" in endpoint
