"""GitHub REST (PAT or App) for what ARC needs: registration tokens, runners, runner groups,
and the legacy autoscaler's workflow runs and jobs.

GET responses go through an RFC 9111 cache (Cache-Control max-age and ETag revalidation; a
304 does not cost rate limit), keyed by credential identity + URL so one cache can be
shared by every client of a scope (B6). Registration tokens are cached until
``registration_token_margin`` before they expire.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import TYPE_CHECKING, Any

import httpx

from gharc.github.auth import AccessToken, AppTokenSource, Credentials, GitHubApp, parse_timestamp
from gharc.github.breaker import BreakerRegistry
from gharc.github.config import GitHubConfig, Scope
from gharc.github.metrics import GitHubMetrics, default_metrics
from gharc.github.models import RegistrationToken, RestRunnerGroup, Runner, WorkflowJob, WorkflowRun
from gharc.github.transport import (
    Clock,
    RetryPolicy,
    Sender,
    Sleep,
    WriteGate,
    error_from_response,
    make_http_client,
)

if TYPE_CHECKING:
    from hishel import AsyncBaseStorage

DEFAULT_USER_AGENT = "gharc/0.1 (actions-runner-controller compatible)"
REST_ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"


class RestClient:
    """Async GitHub REST client for one config scope and one credential.

    ``cache`` is the HTTP cache's storage (shared per pool; a fresh in-memory one when
    None); ``http_cache=False`` sends without any cache, for a client that only posts, so
    that its process need not import hishel.
    """

    def __init__(
        self,
        config: GitHubConfig,
        credentials: Credentials,
        *,
        ca_bundle: str | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        transport: httpx.AsyncBaseTransport | None = None,
        metrics: GitHubMetrics | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        clock: Clock = time.time,
        breakers: BreakerRegistry | None = None,
        cache: AsyncBaseStorage | None = None,
        http_cache: bool = True,
        registration_token_margin: float = 1800.0,
        write_gate: WriteGate | None = None,
    ) -> None:
        self.config = config
        self.credentials = credentials
        self._clock = clock
        if cache is None and http_cache:
            from gharc.github.cache import MemoryStorage

            cache = MemoryStorage()
        self._http = make_http_client(
            metrics=metrics or default_metrics(),
            scope=config.scope_key,
            user_agent=user_agent,
            ca_bundle=ca_bundle,
            transport=transport,
            cache=cache,
        )
        self._sender = Sender(
            self._http,
            policy=retry,
            sleep=sleep,
            clock=clock,
            breakers=breakers,
            identity=credentials.identity,
            write_gate=write_gate,
        )
        self._app: AppTokenSource | None = (
            AppTokenSource(credentials, self._exchange_app_token, clock=clock)
            if isinstance(credentials, GitHubApp)
            else None
        )
        self._reg_margin = registration_token_margin
        self._reg_token: RegistrationToken | None = None
        self._reg_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"RestClient({self.config.config_url!r}, {self.credentials!r})"

    @property
    def sender(self) -> Sender:
        return self._sender

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- plumbing -----------------------------------------------------------------------

    async def _exchange_app_token(self, app_jwt: str) -> AccessToken:
        assert isinstance(self.credentials, GitHubApp)
        inst = self.credentials.installation_id
        response = await self._sender.send(
            "POST",
            f"{self.config.rest_base_url}/app/installations/{inst}/access_tokens",
            endpoint="/app/installations/{installation_id}/access_tokens",
            headers={"Authorization": f"Bearer {app_jwt}", "Accept": REST_ACCEPT},
        )
        if response.status_code != 201:
            raise error_from_response(response, self._clock())
        body = response.json()
        return AccessToken(body["token"], parse_timestamp(body["expires_at"]))

    async def _authorization(self) -> str:
        if self._app is not None:
            return f"Bearer {await self._app.token()}"
        assert not isinstance(self.credentials, GitHubApp)
        return f"Bearer {self.credentials.token}"

    async def request(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        expected: tuple[int, ...] = (200,),
        extra_headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One REST call with auth, retries and caching; non-``expected`` raises typed errors."""
        url = path if path.startswith("http") else f"{self.config.rest_base_url}{path}"
        cache_key = None
        if method == "GET":
            full = str(httpx.URL(url, params=params))
            cache_key = hashlib.sha256(f"{self.credentials.identity} {full}".encode()).hexdigest()
        for attempt in (1, 2):
            headers = {
                "Authorization": await self._authorization(),
                "Accept": REST_ACCEPT,
                "X-GitHub-Api-Version": API_VERSION,
                **(extra_headers or {}),
            }
            response = await self._sender.send(
                method,
                url,
                endpoint=endpoint,
                headers=headers,
                params=params,
                json_body=json_body,
                cache_key=cache_key,
            )
            if response.status_code == 401 and self._app is not None and attempt == 1:
                self._app.invalidate()  # installation token revoked early: mint a new one once
                continue
            break
        if response.status_code not in expected:
            raise error_from_response(response, self._clock())
        return response

    def _scope_path(self) -> tuple[str, str]:
        """(path prefix, its route template) for the config's scope."""
        c = self.config
        if c.scope is Scope.REPOSITORY:
            return f"/repos/{c.organization}/{c.repository}", "/repos/{owner}/{repo}"
        if c.scope is Scope.ORGANIZATION:
            return f"/orgs/{c.organization}", "/orgs/{org}"
        return f"/enterprises/{c.enterprise}", "/enterprises/{enterprise}"

    async def _paginate(
        self,
        path: str,
        endpoint: str,
        key: str,
        per_page: int,
        params: dict[str, Any] | None = None,
        *,
        fresh: bool = False,
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            response = await self.request(
                "GET",
                path,
                endpoint=endpoint,
                params={**(params or {}), "per_page": per_page, "page": page},
                # revalidated with its ETag, not served from the cache: a 304 costs no quota
                extra_headers={"Cache-Control": "no-cache"} if fresh else None,
            )
            chunk = response.json().get(key) or []
            items.extend(chunk)
            has_link = "link" in response.headers
            if ("next" not in response.links if has_link else len(chunk) < per_page) or not chunk:
                return items
            page += 1

    # ---- API ----------------------------------------------------------------------------

    async def create_registration_token(self, *, force: bool = False) -> RegistrationToken:
        """A runner registration token for the scope, reused until close to expiry."""
        async with self._reg_lock:
            tok = self._reg_token
            if (
                not force
                and tok is not None
                and tok.expires_at.timestamp() - self._reg_margin > self._clock()
            ):
                return tok
            prefix, template = self._scope_path()
            response = await self.request(
                "POST",
                f"{prefix}/actions/runners/registration-token",
                endpoint=f"{template}/actions/runners/registration-token",
                expected=(201,),
            )
            self._reg_token = RegistrationToken.model_validate(response.json())
            return self._reg_token

    def forget_registration_token(self) -> None:
        self._reg_token = None

    async def list_runners(self, *, fresh: bool = False) -> list[Runner]:
        """The scope's runners; ``fresh`` asks GitHub rather than a cached answer up to its
        max-age old (60 s on github.com), for a decision a registration made since may undo."""
        prefix, template = self._scope_path()
        raw = await self._paginate(
            f"{prefix}/actions/runners",
            f"{template}/actions/runners",
            "runners",
            100,
            fresh=fresh,
        )
        return [Runner.model_validate(r) for r in raw]

    async def remove_runner(self, runner_id: int) -> None:
        prefix, template = self._scope_path()
        await self.request(
            "DELETE",
            f"{prefix}/actions/runners/{runner_id}",
            endpoint=f"{template}/actions/runners/{{runner_id}}",
            expected=(204,),
        )

    async def list_runner_groups(self) -> list[RestRunnerGroup]:
        c = self.config
        params: dict[str, Any] = {}
        if c.scope is Scope.ENTERPRISE:
            path, endpoint = (
                f"/enterprises/{c.enterprise}/actions/runner-groups",
                "/enterprises/{enterprise}/actions/runner-groups",
            )
        else:
            path, endpoint = (
                f"/orgs/{c.organization}/actions/runner-groups",
                "/orgs/{org}/actions/runner-groups",
            )
            if c.scope is Scope.REPOSITORY:
                params["visible_to_repository"] = c.repository
        raw = await self._paginate(path, endpoint, "runner_groups", 100, params)
        return [RestRunnerGroup.model_validate(g) for g in raw]

    async def list_workflow_runs(
        self, owner: str, repo: str, status: str, *, fresh: bool = False
    ) -> list[WorkflowRun]:
        """``fresh``: revalidated (a 304 costs no quota) rather than a cached answer."""
        raw = await self._paginate(
            f"/repos/{owner}/{repo}/actions/runs",
            "/repos/{owner}/{repo}/actions/runs",
            "workflow_runs",
            100,
            {"status": status},
            fresh=fresh,
        )
        return [WorkflowRun.model_validate(r) for r in raw]

    async def list_workflow_jobs(
        self, owner: str, repo: str, run_id: int, *, fresh: bool = False
    ) -> list[WorkflowJob]:
        raw = await self._paginate(
            f"/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
            "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
            "jobs",
            50,
            fresh=fresh,
        )
        return [WorkflowJob.model_validate(j) for j in raw]


__all__ = ["DEFAULT_USER_AGENT", "RestClient"]
