"""``python -m testworld sim github``: run the fake GitHub standalone until interrupted."""

from __future__ import annotations

import asyncio
import contextlib

from testworld.sim.github.server import DEFAULT_ORG, DEFAULT_REPO, FakeGitHubServer


async def serve(host: str, port: int, poll_timeout: float) -> None:
    async with FakeGitHubServer(port=port, host=host, poll_timeout=poll_timeout) as gh:
        print(f"fake GitHub listening on {gh.url}", flush=True)
        print(f"  githubConfigUrl: {gh.config_url(DEFAULT_ORG)}", flush=True)
        print(f"  repository:      {DEFAULT_REPO}", flush=True)
        print(f"  github_token:    {gh.token}", flush=True)
        print(f"  control API:     {gh.url}/_fake/state", flush=True)
        await asyncio.Event().wait()


def run(host: str = "127.0.0.1", port: int = 8080, poll_timeout: float = 50.0) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(host, port, poll_timeout))
