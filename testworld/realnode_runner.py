"""The entrypoint of the simulated runner image: ``python -m testworld.realnode_runner``.

On a real node a runner pod is a real container, so the simulated runner must be a real
process there: this wraps :class:`testworld.sim.programs.RunnerProgram` (the same code the
kubelet simulator runs in-process) around the container's environment. It redeems
``ACTIONS_RUNNER_INPUT_JITCONFIG`` against the fake GitHub named in it, takes one job,
"runs" it and exits 0, as the official runner image's ``run.sh`` does. SIGTERM (the
kubelet stopping the pod) is the simulator's stop signal: an idle runner disconnects and
a running job ends ``canceled``. A container with ``RUNNER_TOKEN`` in its env is a legacy
``summerwind/actions-runner`` instead (:class:`LegacyRunnerProgram`): it registers with
that token at ``GITHUB_URL`` and takes a job for its labels.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from testworld.sim.kubelet import ContainerContext
from testworld.sim.programs import LegacyRunnerProgram, RunnerProgram


async def run() -> int:
    """Run one simulated runner in this process; returns its exit code."""
    name = os.environ.get("HOSTNAME", "runner")
    ctx = ContainerContext(
        pod={"metadata": {"name": name, "namespace": os.environ.get("POD_NAMESPACE", "")}},
        container={"name": "runner"},
        env=dict(os.environ),
        files={},
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, ctx.stop.set)
    speedup = float(os.environ.get("GHARC_SIM_RUNNER_SPEEDUP", "1"))
    kind = LegacyRunnerProgram if os.environ.get("RUNNER_TOKEN") else RunnerProgram
    program = kind(poll_seconds=10.0, speedup=speedup, renew_seconds=10.0)
    code = await program.run(ctx)
    logging.getLogger(__name__).info("runner %s exits %d", name, code)
    return code


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
