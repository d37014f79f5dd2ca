"""Throughput and memory of gharc.kube against a real control plane; prints numbers.

    .venv/bin/python bench/kube_core.py [--objects 10000]

- informer objects/s: configmaps created by 32 concurrent writers while an informer
  watches; time until the informer holds all of them (bounded by the API server's write rate).
- initial list objects/s: a fresh informer syncing the same objects (paginated LIST).
- memory per 10,000 cached objects: tracemalloc growth while a fresh informer syncs.
- reconciles/s: a no-op controller handed every object once (1 and 8 workers).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc

from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.informer import EventHandlerFuncs, Informer
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import CONFIG_MAPS, NAMESPACES
from testworld.controlplane import ControlPlane

NAMESPACE = "bench"


def _configmap(i: int) -> dict[str, object]:
    """About the size of a small runner-owned object (labels, annotations, some data)."""
    return {
        "metadata": {
            "name": f"cm-{i:06d}",
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/part-of": "gharc",
                "actions.github.com/scale-set-name": "bench-set",
                "index": str(i % 100),
            },
            "annotations": {"actions.github.com/patch-id": str(i)},
        },
        "data": {"runner": f"runner-{i}", "payload": "x" * 200},
    }


async def _create_all(kube: KubeClient, n: int, writers: int = 32) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def writer() -> None:
        while not queue.empty():
            await kube.create(CONFIG_MAPS, _configmap(queue.get_nowait()))

    await asyncio.gather(*(writer() for _ in range(writers)))


class NoOp:
    def __init__(self) -> None:
        self.count = 0
        self.done = asyncio.Event()
        self.target = 0

    async def reconcile(self, request: Request) -> Result:
        self.count += 1
        if self.count >= self.target:
            self.done.set()
        return Result()


async def main(n: int) -> None:
    async with ControlPlane() as cp:
        kube = await KubeClient.from_config(kubeconfig=cp.kubeconfig_path, pool_size=64)
        async with kube:
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})

            watcher = Informer(kube, CONFIG_MAPS, namespace=NAMESPACE)
            all_seen = asyncio.Event()
            watcher.add_event_handler(
                EventHandlerFuncs(add=lambda _: len(watcher.store) >= n and all_seen.set())
            )
            watcher.start()
            await watcher.wait_for_sync()
            began = time.perf_counter()
            await _create_all(kube, n)
            created = time.perf_counter() - began
            await all_seen.wait()
            seen = time.perf_counter() - began
            await watcher.stop()
            print(f"objects:                         {n}")
            print(f"create rate (32 writers):        {n / created:8.0f} objects/s")
            print(
                f"informer objects/s (watch):      {n / seen:8.0f} objects/s "
                f"(lag after last create {1000 * (seen - created):.0f} ms)"
            )

            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            began = time.perf_counter()
            fresh = Informer(kube, CONFIG_MAPS, namespace=NAMESPACE)
            fresh.start()
            await fresh.wait_for_sync()
            synced = time.perf_counter() - began
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            per_10k = (after - before) / len(fresh.store) * 10_000
            print(f"initial list objects/s:          {n / synced:8.0f} objects/s")
            print(
                f"memory per 10,000 cached objects: {per_10k / 2**20:7.1f} MiB "
                f"({(after - before) / len(fresh.store):.0f} B/object, tracemalloc)"
            )
            await fresh.stop()

            for workers in (1, 8):
                cache = Cache(kube, namespace=NAMESPACE)
                rec = NoOp()
                rec.target = n
                ctl = (
                    Builder(cache)
                    .named(f"bench-noop-{workers}")
                    .for_(CONFIG_MAPS)
                    .with_options(max_concurrent_reconciles=workers)
                    .complete(rec)
                )
                await cache.start()
                await cache.wait_for_sync()
                run = asyncio.create_task(ctl.start())
                began = time.perf_counter()
                await rec.done.wait()
                elapsed = time.perf_counter() - began
                print(
                    f"reconciles/s (no-op, {workers} worker{'s' if workers > 1 else ''}):  "
                    f"{n / elapsed:8.0f} /s"
                )
                await ctl.stop()
                await run
                await cache.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(main(args.objects))
