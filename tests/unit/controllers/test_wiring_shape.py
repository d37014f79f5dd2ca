"""One wiring shape for both modes: each controller module has ``setup(manager, deps)``
taking its mode's bundle, and the mode's setup module calls them in ARC's order."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from gharc.controllers.legacy import hra
from gharc.controllers.legacy.deps import LegacyDeps
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.setup import setup_legacy_controllers
from gharc.controllers.legacy.timeutil import from_timestamp
from gharc.github.pool import ClientPool
from gharc.kube.cache import Cache
from testworld.setupmanager import SetupManager

CONTROLLERS = {
    "gharc.controllers.scaleset": (
        "ScaleSetDeps",
        {
            "autoscalinglistener",
            "autoscalingrunnerset",
            "ephemeralrunner",
            "ephemeralrunnerset",
            "nodeloss",
            "orphans",
        },
    ),
    "gharc.controllers.legacy": (
        "LegacyDeps",
        {"hra", "runner", "runnerdeployment", "runnerpod", "runnerreplicaset", "runnerset"},
    ),
}


def _modules_with_setup(package: str) -> dict[str, Any]:
    folder = importlib.import_module(package).__path__[0]
    found = {}
    for path in sorted(Path(folder).glob("*.py")):
        if path.stem in ("__init__", "setup"):
            continue
        module = importlib.import_module(f"{package}.{path.stem}")
        fn = getattr(module, "setup", None)
        if inspect.isfunction(fn) and fn.__module__ == module.__name__:
            found[path.stem] = fn
    return found


@pytest.mark.parametrize("package", sorted(CONTROLLERS))
def test_every_controller_module_is_set_up_from_its_modes_bundle(package: str) -> None:
    bundle, expected = CONTROLLERS[package]
    setups = _modules_with_setup(package)
    assert set(setups) == expected
    for name, fn in setups.items():
        params = list(inspect.signature(fn).parameters.values())
        shape = [(p.name, p.annotation) for p in params]
        assert shape == [("manager", "ManagerLike"), ("deps", bundle)], f"{name}.setup{shape}"


def _legacy() -> tuple[SetupManager, LegacyDeps]:
    kube: Any = object()
    options = LegacyOptions(github_url="https://github.example")
    return SetupManager(kube, Cache(kube)), LegacyDeps.of(options, ClientPool(), kube)


def test_the_legacy_controllers_are_wired_in_arcs_order_from_one_bundle() -> None:
    manager, deps = _legacy()
    controllers = setup_legacy_controllers(manager, deps)
    assert [c.name for c in controllers] == [
        "runner",
        "runnerreplicaset",
        "runnerdeployment",
        "runnerset",
        "runnerpod",
        "horizontalrunnerautoscaler",
    ]
    assert manager.runnables == controllers
    reconcilers = [c.reconciler for c in controllers]
    runner, replica_set, _, runner_set, runner_pod, _ = reconcilers
    views = [runner.pods, replica_set.owners.pods, runner_set.pods, runner_pod.pods]
    assert all(v is deps.runner_pods(manager) for v in views)
    with_github = [getattr(r, "github", getattr(r, "clients", None)) for r in reconcilers]
    assert [g is deps.github for g in with_github] == [True, False, False, True, True, True]


def test_the_hra_takes_its_numbers_and_clock_from_the_options() -> None:
    manager, deps = _legacy()
    deps.options.sync_period = 7.0
    deps.options.default_scale_down_delay = 42.0
    reconciler = hra.setup(manager, deps).reconciler
    assert reconciler.sync_period == 7.0
    assert reconciler.default_scale_down_delay.total_seconds() == 42.0
    moment = from_timestamp(1_700_000_000.0)
    deps.options.clock = lambda: moment
    assert reconciler.clock() == 1_700_000_000.0


def test_a_second_manager_gets_its_own_runner_pod_view() -> None:
    first, deps = _legacy()
    kube: Any = object()
    second = SetupManager(kube, Cache(kube))
    assert deps.runner_pods(first) is deps.runner_pods(first)
    assert deps.runner_pods(second) is not deps.runner_pods(first)
