"""The Actions service client used by scale set controllers and the listener.

A GitHub credential is exchanged lazily for the Actions service URL and an admin JWT
(registration token -> ``POST {rest}/actions/runner-registration`` with ``RemoteAuth``). The
admin token is refreshed ``admin_refresh_margin`` seconds before its ``exp`` and once when
the service answers 401. Message queue calls use the session's queue token instead; their
401 is :class:`MessageQueueTokenExpired` so the caller refreshes the session.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from gharc.github import errors as gherrors
from gharc.github.auth import Credentials
from gharc.github.breaker import BreakerRegistry
from gharc.github.config import GitHubConfig
from gharc.github.metrics import GitHubMetrics, default_metrics
from gharc.github.models import (
    AcquirableJob,
    Label,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerScaleSetJitRunnerConfig,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
)
from gharc.github.rest import DEFAULT_USER_AGENT, RestClient
from gharc.github.transport import (
    Clock,
    RetryPolicy,
    Sender,
    Sleep,
    WriteGate,
    error_from_response,
    make_direct_http,
    make_http_client,
    redact_url,
)
from gharc.http11 import merge_query

API_VERSION = "6.0-preview"
MAX_CAPACITY_HEADER = "X-ScaleSetMaxCapacity"
SCALE_SETS = "_apis/runtime/runnerscalesets"
AGENTS = "_apis/distributedtask/pools/0/agents"
# Long polls are held ~50 s by the service; the read timeout must outlast that.
MESSAGE_POLL_TIMEOUT = 90.0


@dataclass(frozen=True)
class AdminConnection:
    url: str
    token: str
    expires_at: float

    def __repr__(self) -> str:
        return f"AdminConnection(url={self.url!r}, expires_at={self.expires_at})"


def _jwt_expiry(token: str, fallback: float) -> float:
    """The ``exp`` claim of the admin token, read without verifying it (the service's key is
    not ours to check). Decoded by hand, not with PyJWT: the payload is base64url JSON, and
    PyJWT's import brings cryptography into every listener process for this one read."""
    parts = token.split(".")
    if len(parts) != 3:
        return fallback
    payload = parts[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError included
        return fallback
    if not isinstance(claims, dict):
        return fallback
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) else fallback


def _queue_url(queue_url: str, suffix: str) -> str:
    """Append ``/suffix`` to the queue URL's path, keeping any query string as written (by
    string operations: parsing the URL with httpx costs more than the rest of the call)."""
    rest, hash_, fragment = queue_url.partition("#")
    path, question, query = rest.partition("?")
    return f"{path.rstrip('/')}/{suffix}{question}{query}{hash_}{fragment}"


class ActionsClient:
    """Async client for the Actions service of one config URL and credential."""

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
        rest: RestClient | None = None,
        admin_refresh_margin: float = 60.0,
        limits: httpx.Limits | None = None,
        write_gate: WriteGate | None = None,
    ) -> None:
        self.config = config
        metrics = metrics or default_metrics()
        self._owns_rest = rest is None
        self.rest = rest or RestClient(
            config,
            credentials,
            ca_bundle=ca_bundle,
            user_agent=user_agent,
            transport=transport,
            metrics=metrics,
            retry=retry,
            sleep=sleep,
            clock=clock,
            breakers=breakers,
            # Only the registration token's POST goes through it, which no cache stores;
            # so a listener pod never loads hishel (with sqlite3 and msgpack: 2.3 MiB).
            http_cache=False,
            write_gate=write_gate,
        )
        self._http = make_http_client(
            metrics=metrics,
            scope=config.scope_key,
            user_agent=user_agent,
            ca_bundle=ca_bundle,
            transport=transport,
            limits=limits,
        )
        self._direct = make_direct_http(
            metrics=metrics,
            scope=config.scope_key,
            user_agent=user_agent,
            ca_bundle=ca_bundle,
            transport=transport,
            limits=limits,
        )
        self._sender = Sender(
            self._http,
            policy=retry,
            sleep=sleep,
            clock=clock,
            breakers=breakers,
            identity=credentials.identity,
            direct=self._direct,
            write_gate=write_gate,
        )
        self._clock = clock
        self._margin = admin_refresh_margin
        self._admin: AdminConnection | None = None
        self._admin_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"ActionsClient({self.config.config_url!r}, {self.rest.credentials!r})"

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._direct is not None:
            await self._direct.aclose()
        if self._owns_rest:
            await self.rest.aclose()

    async def __aenter__(self) -> ActionsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- admin connection ---------------------------------------------------------------

    async def admin_connection(self, *, force: bool = False) -> AdminConnection:
        """The service URL and admin token, exchanged on first use and near expiry."""
        async with self._admin_lock:
            conn = self._admin
            if not force and conn is not None and conn.expires_at - self._margin > self._clock():
                return conn
            self._admin = await self._exchange()
            return self._admin

    async def _exchange(self) -> AdminConnection:
        for attempt in (1, 2):
            reg = await self.rest.create_registration_token(force=attempt == 2)
            response = await self._sender.send(
                "POST",
                f"{self.config.rest_base_url}/actions/runner-registration",
                endpoint="/actions/runner-registration",
                headers={"Authorization": f"RemoteAuth {reg.token}"},
                json_body={"url": self.config.config_url, "runner_event": "register"},
            )
            if response.status_code in (401, 403) and attempt == 1:
                continue  # a stale cached registration token: mint a fresh one once
            break
        if not response.is_success:
            raise error_from_response(response, self._clock())
        body = response.json()
        url, token = body.get("url"), body.get("token")
        if not url or not token:
            raise gherrors.GitHubError(
                "runner-registration response lacks url or token", status=response.status_code
            )
        return AdminConnection(url, token, _jwt_expiry(token, self._clock() + 3000))

    # ---- request helper -----------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        expected: tuple[int, ...] = (200,),
        queue_token: str | None = None,
        absolute_url: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        for attempt in (1, 2):
            query: dict[str, Any] | None
            if absolute_url is not None:
                # The queue URL may carry a query of its own: merge into it (httpx's
                # ``params=`` would replace it), as ARC's and GitHub's clients keep it.
                url, query = merge_query(absolute_url, params), None
                token = queue_token or (await self.admin_connection()).token
            else:
                conn = await self.admin_connection()
                url = f"{conn.url.rstrip('/')}/{path.lstrip('/')}"
                query = {**(params or {}), "api-version": API_VERSION}
                token = queue_token if queue_token is not None else conn.token
            response = await self._sender.send(
                method,
                url,
                endpoint=endpoint,
                params=query,
                json_body=json_body,
                headers={"Authorization": f"Bearer {token}", **(headers or {})},
                timeout=timeout,
            )
            if response.status_code == 401 and queue_token is None and attempt == 1:
                await self.admin_connection(force=True)
                continue
            break
        if response.status_code in expected:
            return response
        err = error_from_response(response, self._clock())
        if queue_token is not None and isinstance(err, gherrors.Unauthorized):
            raise gherrors.MessageQueueTokenExpired(
                err.message,
                status=err.status,
                request_id=err.request_id,
                url=err.url,
                method=err.method,
                exception_name=err.exception_name,
            )
        raise err

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        return json.loads(response.content) if response.content else None

    # ---- runner groups and scale sets ---------------------------------------------------

    async def get_runner_group_by_name(self, name: str) -> RunnerGroup:
        response = await self._call(
            "GET",
            "_apis/runtime/runnergroups/",
            endpoint="/_apis/runtime/runnergroups",
            params={"groupName": name},
        )
        body = self._json(response) or {}
        groups = body.get("value") or []
        if len(groups) == 1:
            return RunnerGroup.model_validate(groups[0])
        if not groups:
            raise gherrors.NotFound(f"no runner group named {name!r}", status=404)
        raise gherrors.GitHubError(f"{len(groups)} runner groups named {name!r}")

    async def get_runner_scale_set(self, runner_group_id: int, name: str) -> RunnerScaleSet | None:
        response = await self._call(
            "GET",
            SCALE_SETS,
            endpoint=f"/{SCALE_SETS}",
            params={"runnerGroupId": runner_group_id, "name": name},
        )
        sets = (self._json(response) or {}).get("value") or []
        if not sets:
            return None
        if len(sets) > 1:
            raise gherrors.GitHubError(f"{len(sets)} runner scale sets named {name!r}")
        return RunnerScaleSet.model_validate(sets[0])

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet | None:
        try:
            response = await self._call(
                "GET", f"{SCALE_SETS}/{scale_set_id}", endpoint=f"/{SCALE_SETS}/{{id}}"
            )
        except gherrors.NotFound:
            return None
        body = self._json(response)
        return RunnerScaleSet.model_validate(body) if body else None

    async def create_runner_scale_set(self, rss: RunnerScaleSet) -> RunnerScaleSet:
        if not rss.labels:
            if not rss.name:
                raise ValueError("a runner scale set needs a name or at least one label")
            rss = rss.model_copy(update={"labels": [Label(name=rss.name)]})
        response = await self._call(
            "POST",
            SCALE_SETS,
            endpoint=f"/{SCALE_SETS}",
            json_body=rss.wire(),
            expected=(200, 201),
        )
        return RunnerScaleSet.model_validate(self._json(response))

    async def update_runner_scale_set(
        self, scale_set_id: int, rss_fields: RunnerScaleSet | Mapping[str, Any]
    ) -> RunnerScaleSet:
        body = rss_fields.wire() if isinstance(rss_fields, RunnerScaleSet) else dict(rss_fields)
        response = await self._call(
            "PATCH",
            f"{SCALE_SETS}/{scale_set_id}",
            endpoint=f"/{SCALE_SETS}/{{id}}",
            json_body=body,
        )
        return RunnerScaleSet.model_validate(self._json(response))

    async def delete_runner_scale_set(self, scale_set_id: int) -> None:
        await self._call(
            "DELETE",
            f"{SCALE_SETS}/{scale_set_id}",
            endpoint=f"/{SCALE_SETS}/{{id}}",
            expected=(204, 200),
        )

    # ---- sessions and messages ----------------------------------------------------------

    async def create_message_session(self, scale_set_id: int, owner: str) -> RunnerScaleSetSession:
        try:
            response = await self._call(
                "POST",
                f"{SCALE_SETS}/{scale_set_id}/sessions",
                endpoint=f"/{SCALE_SETS}/{{id}}/sessions",
                json_body={"ownerName": owner},
                expected=(200, 201),
            )
        except gherrors.Conflict as exc:
            if isinstance(exc, gherrors.SessionConflict):
                raise
            raise gherrors.SessionConflict(
                exc.message,
                status=exc.status,
                request_id=exc.request_id,
                url=exc.url,
                method=exc.method,
                exception_name=exc.exception_name,
            ) from None
        return RunnerScaleSetSession.model_validate(self._json(response))

    async def refresh_message_session(
        self, scale_set_id: int, session_id: str
    ) -> RunnerScaleSetSession:
        response = await self._call(
            "PATCH",
            f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}",
            endpoint=f"/{SCALE_SETS}/{{id}}/sessions/{{session_id}}",
        )
        return RunnerScaleSetSession.model_validate(self._json(response))

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        await self._call(
            "DELETE",
            f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}",
            endpoint=f"/{SCALE_SETS}/{{id}}/sessions/{{session_id}}",
            expected=(204, 200),
        )

    async def get_message(
        self, queue_url: str, queue_token: str, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        """Long-poll the queue; None when the service answers 202 (nothing new)."""
        params = {"lastMessageId": last_message_id} if last_message_id > 0 else {}
        response = await self._call(
            "GET",
            "",
            endpoint="{messageQueueUrl}",
            absolute_url=queue_url,
            params=params,
            queue_token=queue_token,
            expected=(200, 202),
            headers={
                "Accept": f"application/json; api-version={API_VERSION}",
                MAX_CAPACITY_HEADER: str(max(0, max_capacity)),
            },
            timeout=MESSAGE_POLL_TIMEOUT,
        )
        if response.status_code == 202 or not response.content:
            return None
        try:
            return RunnerScaleSetMessage.from_wire(self._json(response))
        except ValueError as err:  # not JSON, or not an object: no message id to act on
            raise gherrors.MalformedResponse(
                f"unreadable queue message: {err}",
                status=response.status_code,
                url=redact_url(response.request.url),
                method="GET",
            ) from None

    async def delete_message(self, queue_url: str, queue_token: str, message_id: int) -> None:
        await self._call(
            "DELETE",
            "",
            endpoint="{messageQueueUrl}/{message_id}",
            absolute_url=_queue_url(queue_url, str(message_id)),
            queue_token=queue_token,
            expected=(204, 200),
        )

    # ---- jobs ---------------------------------------------------------------------------

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[AcquirableJob]:
        response = await self._call(
            "GET",
            f"{SCALE_SETS}/{scale_set_id}/acquirablejobs",
            endpoint=f"/{SCALE_SETS}/{{id}}/acquirablejobs",
            expected=(200, 204),
        )
        if response.status_code == 204 or not response.content:
            return []
        return [
            AcquirableJob.model_validate(j) for j in (self._json(response) or {}).get("value") or []
        ]

    async def acquire_jobs(
        self, scale_set_id: int, queue_token: str, request_ids: list[int]
    ) -> list[int]:
        response = await self._call(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/acquirejobs",
            endpoint=f"/{SCALE_SETS}/{{id}}/acquirejobs",
            json_body=list(request_ids),
            queue_token=queue_token,
        )
        return [int(i) for i in (self._json(response) or {}).get("value") or []]

    # ---- runners ------------------------------------------------------------------------

    async def generate_jit_runner_config(
        self, scale_set_id: int, name: str, work_folder: str = "_work"
    ) -> RunnerScaleSetJitRunnerConfig:
        response = await self._call(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/generatejitconfig",
            endpoint=f"/{SCALE_SETS}/{{id}}/generatejitconfig",
            json_body={"name": name, "workFolder": work_folder},
            expected=(200, 201),
        )
        return RunnerScaleSetJitRunnerConfig.model_validate(self._json(response))

    async def get_runner(self, runner_id: int) -> RunnerReference | None:
        try:
            response = await self._call(
                "GET", f"{AGENTS}/{runner_id}", endpoint=f"/{AGENTS}/{{id}}"
            )
        except gherrors.NotFound:
            return None
        body = self._json(response)
        return RunnerReference.model_validate(body) if body else None

    async def list_runners(self) -> list[dict[str, Any]]:
        """Every registration of the scope in one call, each with its ``assignedRequest``
        (absent when idle): what a reconcile against GitHub's view needs to tell busy
        runners from idle ones."""
        response = await self._call(
            "GET", AGENTS, endpoint=f"/{AGENTS}", params={"includeAssignedRequest": "true"}
        )
        return list((self._json(response) or {}).get("value") or ())

    async def get_runner_by_name(self, name: str) -> RunnerReference | None:
        response = await self._call(
            "GET", AGENTS, endpoint=f"/{AGENTS}", params={"agentName": name}
        )
        runners = (self._json(response) or {}).get("value") or []
        if not runners:
            return None
        if len(runners) > 1:
            raise gherrors.GitHubError(f"{len(runners)} runners named {name!r}")
        return RunnerReference.model_validate(runners[0])

    async def remove_runner(self, runner_id: int) -> None:
        """Deregister a runner; raises AgentNotFound if gone, JobStillRunning if busy."""
        await self._call(
            "DELETE", f"{AGENTS}/{runner_id}", endpoint=f"/{AGENTS}/{{id}}", expected=(204, 200)
        )
