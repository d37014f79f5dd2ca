"""One wiring shape: every scale set controller is set up from the same bundle."""

from __future__ import annotations

from typing import Any

from gharc.api.resources import AUTOSCALING_LISTENERS, AUTOSCALING_RUNNER_SETS
from gharc.controllers.scaleset import autoscalingrunnerset, ephemeralrunner, ephemeralrunnerset
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube.cache import Cache
from gharc.kube.reconcile import Request
from testworld.setupmanager import SetupManager


def _manager() -> SetupManager:
    kube: Any = object()
    return SetupManager(kube, Cache(kube))


def _deps(**kw: Any) -> ScaleSetDeps:
    options = ScaleSetOptions(controller_namespace="gharc-system")
    return ScaleSetDeps(options, ClientResolver(object(), object()), **kw)  # type: ignore[arg-type]


def test_the_two_runner_reconcilers_share_one_newborn_table() -> None:
    """The set's reconciler adds the runners it creates, the runner's reconciler takes
    them: with two tables every runner would pay the reads a newborn skips."""
    manager, deps = _manager(), _deps()
    runner_set = ephemeralrunnerset.setup(manager, deps).reconciler
    runner = ephemeralrunner.setup(manager, deps).reconciler
    runner_set.newborn.add("uid-1")
    assert runner.newborn.take("uid-1") is True


def test_two_processes_wired_apart_do_not_share_it() -> None:
    first, second = _deps(), _deps()
    assert first.newborn is not second.newborn


def _deliver(manager: SetupManager, resource: Any, obj: dict[str, Any]) -> None:
    for handler in manager.cache.informer(resource)._handlers:
        handler.on_add(obj)


def test_a_single_watched_namespace_filters_events_before_they_are_queued() -> None:
    """``--watch-single-namespace``: the cache holds the controller's namespace too (for
    the listeners); a set there, its runner set, or a listener naming it queue nothing."""
    manager = _manager()
    controller = autoscalingrunnerset.setup(manager, _deps(watch_namespace="team-a"))
    for ns in ("gharc-system", "team-a"):
        _deliver(manager, AUTOSCALING_RUNNER_SETS, {"metadata": {"namespace": ns, "name": "s"}})
        listener = {
            "metadata": {"namespace": "gharc-system", "name": f"l-{ns}"},
            "spec": {"autoscalingRunnerSetNamespace": ns, "autoscalingRunnerSetName": "s2"},
        }
        _deliver(manager, AUTOSCALING_LISTENERS, listener)
    queued = set(controller.queue._dirty)
    assert queued == {Request("team-a", "s"), Request("team-a", "s2")}


def test_without_a_watched_namespace_every_set_is_queued() -> None:
    manager = _manager()
    controller = autoscalingrunnerset.setup(manager, _deps())
    for ns in ("gharc-system", "team-a"):
        _deliver(manager, AUTOSCALING_RUNNER_SETS, {"metadata": {"namespace": ns, "name": "s"}})
    assert len(controller.queue) == 2
