"""Legacy mode controllers (``actions.summerwind.dev/v1alpha1``): Runner, runner pods,
RunnerReplicaSet, RunnerDeployment, RunnerSet and HorizontalRunnerAutoscaler. Each module's
``setup(manager, deps)`` wires its controller from one
:class:`~gharc.controllers.legacy.deps.LegacyDeps`;
:func:`gharc.controllers.legacy.setup.setup_legacy_controllers` wires them all."""
