"""Raw HTTP helpers for the fake's own tests: plain httpx, not gharc.github, so the contract
is pinned independently of the client."""

from __future__ import annotations

from typing import Any

import httpx

from testworld.sim.github import FakeGitHubServer

API = "api-version=6.0-preview"


class Raw:
    """An admin-authenticated view of the fake for one org."""

    def __init__(self, gh: FakeGitHubServer, http: httpx.AsyncClient) -> None:
        self.gh = gh
        self.http = http
        self.service = ""
        self.admin = ""

    async def connect(self, org: str = "octo-org", *, token: str | None = None) -> None:
        """Admin credentials for ``org``, from ``token`` (a PAT; the default one if None)."""
        r = await self.http.post(
            f"{self.gh.url}/api/v3/orgs/{org}/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {token or self.gh.token}"},
        )
        assert r.status_code == 201, r.text
        r = await self.http.post(
            f"{self.gh.url}/api/v3/actions/runner-registration",
            headers={"Authorization": f"RemoteAuth {r.json()['token']}"},
            json={"url": self.gh.config_url(org), "runner_event": "register"},
        )
        assert r.status_code == 200, r.text
        self.service, self.admin = r.json()["url"], r.json()["token"]

    async def svc(self, method: str, path: str, **kw: Any) -> httpx.Response:
        sep = "&" if "?" in path else "?"
        headers = {"Authorization": f"Bearer {self.admin}", **kw.pop("headers", {})}
        return await self.http.request(
            method, f"{self.service}{path}{sep}{API}", headers=headers, **kw
        )

    async def scale_set(self, name: str = "arc") -> dict[str, Any]:
        r = await self.svc(
            "POST",
            "_apis/runtime/runnerscalesets",
            json={
                "name": name,
                "runnerGroupId": 1,
                "labels": [{"type": "System", "name": name}],
                "runnerSetting": {"ephemeral": True, "isElastic": True, "disableUpdate": False},
            },
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    async def session(self, ss_id: int) -> dict[str, Any]:
        r = await self.svc(
            "POST", f"_apis/runtime/runnerscalesets/{ss_id}/sessions", json={"ownerName": "test"}
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    async def poll(
        self, session: dict[str, Any], last: int = 0, *, capacity: int = 10
    ) -> httpx.Response:
        return await self.http.get(
            session["messageQueueUrl"],
            params={"lastMessageId": last} if last else None,
            headers={
                "Authorization": f"Bearer {session['messageQueueAccessToken']}",
                "Accept": "application/json; api-version=6.0-preview",
                "X-ScaleSetMaxCapacity": str(capacity),
            },
        )
