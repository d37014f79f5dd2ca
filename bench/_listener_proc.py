"""The listener process of ``listener_latency.py``: pod mode or in-process mode, optionally
profiled.

    python bench/_listener_proc.py pod|in-process [--profile FILE]

``pod`` runs ``gharc.listener``'s own ``main`` (what a listener pod runs: httpx to GitHub and
to the API server). ``in-process`` runs the listener the way ``gharc controller`` hosts it:
a :class:`~gharc.listener.host.ListenerHost` over the controller's kind of Kubernetes client
(kubernetes_asyncio's session, aiohttp; its ``for_caller("listener")`` view) and an Actions
client from the in-process listeners' pool, with cleanup markers fed by an informer (none
here, as the bench has no controller). Both read ``$LISTENER_CONFIG_PATH`` and stop on
SIGTERM.

``--profile FILE``: cProfile runs from SIGUSR1 to SIGUSR2 and its stats (CPU time) are
dumped to FILE at SIGUSR2, so the benchmark profiles its jobs and not the start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import signal
import sys
import time
from typing import Any


def profile_on_signals(path: str) -> None:
    """SIGUSR1 starts the profiler, SIGUSR2 stops it and writes its stats to ``path``."""
    profiler = cProfile.Profile(time.process_time)  # CPU, not waits

    def start(*_: Any) -> None:
        profiler.enable()

    def stop(*_: Any) -> None:
        profiler.disable()
        profiler.dump_stats(path)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


async def in_process(raw: dict[str, Any]) -> int:
    from gharc.controllers.scaleset.inprocesslisteners import hosted_config, listener_pool
    from gharc.github.auth import PersonalAccessToken
    from gharc.github.config import parse_config_url
    from gharc.kube.client import KubeClient
    from gharc.listener.host import ListenerHost
    from gharc.listener.metrics import ListenerMetrics

    kube = await KubeClient.from_config(qps=300.0, burst=600, field_manager="gharc-controller")
    host = ListenerHost(kube.for_caller("listener"), identity="bench-controller")
    pool = listener_pool(user_agent="gharc-bench", transport=None)

    async def resolve(fresh: bool) -> Any:
        cfg = hosted_config(raw)
        api = pool.get(cfg.configure_url, PersonalAccessToken(cfg.github_token))
        return cfg, api, ListenerMetrics.for_listener(cfg, parse_config_url(cfg.configure_url))

    namespace, name = raw["ephemeral_runner_set_namespace"], raw["ephemeral_runner_set_name"]
    host.ensure((namespace, "bench-listener"), (namespace, name), "bench", resolve)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await host.stop()
    await pool.aclose()
    await kube.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("pod", "in-process"))
    parser.add_argument("--profile", default=None)
    args = parser.parse_args()
    if args.profile:
        profile_on_signals(args.profile)
    if args.mode == "pod":
        from gharc.listener.__main__ import main as listener_main

        return listener_main()
    import logging

    logging.basicConfig(level=logging.ERROR)
    with open(os.environ["LISTENER_CONFIG_PATH"]) as f:
        raw = json.load(f)
    return asyncio.run(in_process(raw))


if __name__ == "__main__":
    sys.exit(main())
