"""Chaos cases at benchmark sizes: the same cases as ``tests/chaos``, bigger, one table.

Starts a real control plane (etcd + kube-apiserver), then runs each case in its own confined
World (controller subprocess, kubelet simulator, fake GitHub) and prints, per case, jobs
submitted / done / never given a runner, runners per job, orphan registrations, leftovers
and the time from the fault to the next job's runner. Exits 1 when a case misses issue 19's
bar (a job without a runner, an orphan, a runner too many, something left behind).

    .venv/bin/python bench/chaos.py                       # every case, BIG sizes
    .venv/bin/python bench/chaos.py --cases leader-kill --jobs 100 --scale-sets 5
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import tempfile
import time
from pathlib import Path

from gharc.api import crds
from testworld.chaos import BIG, CASES, CaseResult, Sizes, problems, table
from testworld.controlplane import install_crds_sync, running_control_plane
from testworld.worlds import WorldFactory

LOG_DIR = Path(tempfile.gettempdir()) / "gharc-chaos-bench-logs"


async def bench(kubeconfig: str, names: list[str], sizes: Sizes) -> list[CaseResult]:
    results: list[CaseResult] = []
    stamp = time.strftime("%H%M%S")
    for name in names:
        factory = WorldFactory(kubeconfig, LOG_DIR)
        started = time.monotonic()
        try:
            results.append(await CASES[name](factory, f"bench-{name}-{stamp}", sizes))
        finally:
            await factory.close()
        print(f"{name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--jobs", type=int, default=BIG.jobs, help="per scale set, before")
    parser.add_argument("--after", type=int, default=BIG.after, help="per scale set, after")
    parser.add_argument("--scale-sets", type=int, default=BIG.scale_sets)
    parser.add_argument("--max-runners", type=int, default=BIG.max_runners)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sizes = dataclasses.replace(
        BIG,
        jobs=args.jobs,
        after=args.after,
        scale_sets=args.scale_sets,
        max_runners=args.max_runners,
    )
    with running_control_plane() as cp:
        install_crds_sync(cp.kubeconfig_path, crds.load("all"))
        results = asyncio.run(bench(cp.kubeconfig_path, args.cases, sizes))
    print(f"chaos cases ({sizes}); controller logs under {LOG_DIR}")
    print(table(results))
    failed = {r.case: problems(r) for r in results if problems(r)}
    for case, why in failed.items():
        print(f"FAIL {case}: {'; '.join(why)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
