"""Legacy mode controllers (``actions.summerwind.dev/v1alpha1``): Runner, runner pods,
RunnerReplicaSet, RunnerDeployment and RunnerSet. Wire them with
:func:`gharc.controllers.legacy.setup.setup_legacy_controllers`."""
