"""The controller's side of ``python -m testworld bench``: whose calls, how fast idle, how
fast a burst.

Run inside the jobs benchmark's world, after its job stream (:mod:`testworld.bench`):

- **calls by caller**: the in-process listeners talk to the API server through the
  controller's client, so ``gharc_kube_api_requests_total`` holds their ERS spec patches
  and runner status patches too; their share is counted apart
  (``gharc_kube_api_requests_by_caller_total{caller="listener"}``) and subtracted, so
  calls per job are printed for the controller alone and with the listeners;
- **patch -> pod when idle**: one more replica on an idle EphemeralRunnerSet, ten times;
  the time from the patch to its runner pod's first appearance in a watch;
- **0 -> N pods**: ``replicas: N`` at once; the time until all N runner pods exist.

The last two use an EphemeralRunnerSet of their own (a copy of the first scale set's, no
AutoscalingRunnerSet and so no listener that could patch it back), in the first scale
set's namespace, so they measure the controller's creation pipeline and nothing else.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from typing import Any

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from testworld.world import scrape_samples

__all__ = ["burst", "caller_calls", "failed_calls", "idle_latency", "make_runner_set"]

BURST_SET = "bench-burst"


async def caller_calls(url: str) -> dict[str, dict[str, int]]:
    """``gharc_kube_api_requests_by_caller_total`` as {caller: {"verb resource": n}}."""
    out: dict[str, Counter[str]] = {}
    for labels, value in await scrape_samples(url, "gharc_kube_api_requests_by_caller_total"):
        key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}"
        out.setdefault(labels.get("caller", "?"), Counter())[key] += value
    return {k: dict(v) for k, v in out.items()}


async def failed_calls(url: str) -> dict[str, int]:
    """``gharc_kube_api_requests_total`` answered 4xx/5xx, by "verb resource code"."""
    out: Counter[str] = Counter()
    for labels, value in await scrape_samples(url, "gharc_kube_api_requests_total"):
        code = labels.get("code", "?")
        if not code.startswith("2"):
            out[f"{labels.get('verb')} {labels.get('resource')} {code}"] += value
    return dict(out)


async def make_runner_set(kube: Any, namespace: str, template_set: str) -> dict[str, Any]:
    """An EphemeralRunnerSet like ``template_set`` (same scale set and credentials) at 0
    replicas, owned by nothing."""
    src = await kube.get(EPHEMERAL_RUNNER_SETS, template_set, namespace=namespace)
    meta = src["metadata"]
    spec = dict(src["spec"])
    spec.update(replicas=0, patchID=0)
    return await kube.create(
        EPHEMERAL_RUNNER_SETS,
        {
            "metadata": {
                "name": BURST_SET,
                "namespace": namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": {
                    k: v
                    for k, v in (meta.get("annotations") or {}).items()
                    if k.startswith("actions.github.com/")
                },
            },
            "spec": spec,
        },
    )


def _burst_pods(timeline: Any, namespace: str) -> dict[str, float]:
    prefix = f"{namespace}/{BURST_SET}-"
    return {k: t for k, t in timeline.pod_created.items() if k.startswith(prefix)}


def _burst_runners(timeline: Any, namespace: str) -> dict[str, float]:
    prefix = f"{namespace}/{BURST_SET}-"
    return {k: t for k, t in timeline.er_created.items() if k.startswith(prefix)}


async def _scale(kube: Any, namespace: str, replicas: int, patch_id: int) -> float:
    began = time.time()
    await kube.merge_patch(
        EPHEMERAL_RUNNER_SETS,
        BURST_SET,
        {"spec": {"replicas": replicas, "patchID": patch_id}},
        namespace=namespace,
    )
    return began


async def _drain(kube: Any, namespace: str, patch_id: int, timeout: float) -> None:
    """Back to 0 replicas; wait (bounded) until the set's runners are gone."""
    await _scale(kube, namespace, 0, patch_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runners = await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)
        if not any(r["metadata"]["name"].startswith(BURST_SET + "-") for r in runners):
            return
        await asyncio.sleep(0.5)


async def _wait_pods(timeline: Any, namespace: str, count: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while len(_burst_pods(timeline, namespace)) < count:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def idle_latency(
    kube: Any, timeline: Any, namespace: str, *, samples: int = 10, gap: float = 1.0
) -> dict[str, Any]:
    """Patch -> runner pod created, one replica at a time on an idle set (seconds)."""
    lat: list[float] = []
    for i in range(1, samples + 1):
        before = set(_burst_pods(timeline, namespace))
        began = await _scale(kube, namespace, i, 1000 + i)
        if not await _wait_pods(timeline, namespace, len(before) + 1, 30):
            break
        new = [t for k, t in _burst_pods(timeline, namespace).items() if k not in before]
        lat.append(min(new) - began)
        await asyncio.sleep(gap)
    await _drain(kube, namespace, 0, timeout=120)
    return {
        "p50": round(statistics.median(lat), 3) if lat else None,
        "max": round(max(lat), 3) if lat else None,
        "n": len(lat),
    }


async def burst(
    kube: Any, timeline: Any, namespace: str, *, count: int = 400, timeout: float = 180
) -> dict[str, Any]:
    """0 -> ``count`` runner pods requested at once: seconds until all exist."""
    before = set(_burst_pods(timeline, namespace))
    old_runners = set(_burst_runners(timeline, namespace))
    began = await _scale(kube, namespace, count, 5000)
    done = await _wait_pods(timeline, namespace, len(before) + count, timeout)
    new = {k: t for k, t in _burst_pods(timeline, namespace).items() if k not in before}
    pods = sorted(new.values())
    runners = {k: t for k, t in _burst_runners(timeline, namespace).items() if k not in old_runners}
    stages = [new[k] - t for k, t in runners.items() if k in new]
    out: dict[str, Any] = {
        "pods": len(pods),
        "all_exist_s": round(pods[-1] - began, 2) if done and pods else None,
        "first_pod_s": round(pods[0] - began, 3) if pods else None,
        "half_s": round(pods[len(pods) // 2] - began, 2) if pods else None,
        "all_runners_exist_s": round(max(runners.values()) - began, 2) if runners else None,
        "runner_to_pod_p50_s": round(statistics.median(stages), 3) if stages else None,
        "runner_to_pod_max_s": round(max(stages), 3) if stages else None,
    }
    await _drain(kube, namespace, 0, timeout=10)
    return out
