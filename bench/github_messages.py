"""Messages per second through one listener session, and enqueue -> delivery latency.

Runs the fake GitHub in-process and drives it with gharc's own ActionsClient, the way the
listener does: long-poll, acquire JobAvailable, delete the message. Prints numbers; asserts
nothing (see docs/development.md). Takes well under 30 s.

    .venv/bin/python bench/github_messages.py [--jobs 1000] [--latency-samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from prometheus_client import CollectorRegistry

from gharc.github import ActionsClient, GitHubMetrics, PersonalAccessToken, parse_config_url
from gharc.github.models import JobAvailable, RunnerScaleSet
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def run(jobs: int, samples: int) -> None:
    async with FakeGitHubServer(poll_timeout=5.0) as gh:
        client = ActionsClient(
            parse_config_url(gh.config_url()),
            PersonalAccessToken(gh.token),
            metrics=GitHubMetrics(CollectorRegistry()),
        )
        ss = await client.create_runner_scale_set(RunnerScaleSet(name="bench", runner_group_id=1))
        assert ss.id is not None
        s = await client.create_message_session(ss.id, "bench")
        url, tok = s.message_queue_url, s.message_queue_access_token
        gh.state.message_batch = 1  # one job message per queue message: worst case for us
        gh.state.truncate_deliveries = False  # ... and every one of them delivered

        # throughput: a backlog drained by one session (poll + acquire + delete per message)
        for _ in range(jobs):
            gh.enqueue_job(DEFAULT_REPO, ["bench"])
        last, handled = 0, 0
        start = time.perf_counter()
        while handled < jobs * 2:  # each job yields JobAvailable then JobAssigned
            msg = await client.get_message(url, tok, last, 10)
            if msg is None:
                break
            ids = [j.runner_request_id for j in msg.of_type(JobAvailable)]
            if ids:
                await client.acquire_jobs(ss.id, tok, ids)
            await client.delete_message(url, tok, msg.message_id)
            last = msg.message_id
            handled += 1
        elapsed = time.perf_counter() - start
        print(
            f"throughput: {handled} messages in {elapsed:.2f}s = {handled / elapsed:.0f} msg/s "
            "(poll + acquire + delete each, one session)"
        )

        # latency: enqueue while the poll is parked at the fake
        latencies: list[float] = []
        for _ in range(samples):
            poll = asyncio.create_task(client.get_message(url, tok, last, 10))
            await asyncio.sleep(0.002)  # let the request reach the server and park
            t0 = time.perf_counter()
            gh.enqueue_job(DEFAULT_REPO, ["bench"])
            msg = await poll
            latencies.append(time.perf_counter() - t0)
            assert msg is not None
            await client.delete_message(url, tok, msg.message_id)
            last = msg.message_id
        ms = [x * 1000 for x in latencies]
        print(
            f"enqueue -> delivery over {samples} samples: p50 {pct(ms, 50):.2f} ms, "
            f"p99 {pct(ms, 99):.2f} ms, max {max(ms):.2f} ms, mean {statistics.mean(ms):.2f} ms"
        )
        await client.delete_message_session(ss.id, s.session_id)
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.jobs, args.latency_samples))


if __name__ == "__main__":
    main()
