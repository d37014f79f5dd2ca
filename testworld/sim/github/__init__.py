"""A fake GitHub (GHES REST + the Actions service + a runner-side API) for tests and demos.

An honest stand-in for the outside world: it builds its own JSON instead of reusing
``gharc.github`` models, so a client bug cannot hide behind a shared definition.
"""

from testworld.sim.github.faults import Fault, FaultTable
from testworld.sim.github.server import (
    DEFAULT_ENTERPRISE,
    DEFAULT_ORG,
    DEFAULT_REPO,
    DEFAULT_TOKEN,
    FakeGitHubServer,
    make_app,
)
from testworld.sim.github.state import FakeGitHubState, Job, Runner, ScaleSet, Session, StateError

__all__ = [
    "DEFAULT_ENTERPRISE",
    "DEFAULT_ORG",
    "DEFAULT_REPO",
    "DEFAULT_TOKEN",
    "FakeGitHubServer",
    "FakeGitHubState",
    "Fault",
    "FaultTable",
    "Job",
    "Runner",
    "ScaleSet",
    "Session",
    "StateError",
    "make_app",
]
