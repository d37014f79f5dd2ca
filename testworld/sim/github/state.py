"""The fake GitHub's world: accounts, credentials, scale sets, sessions, jobs and runners.

Everything the HTTP handlers do goes through methods here, and so does the Python API the
tests use, so both see one consistent world. Methods are synchronous (state changes are
instantaneous); long polls wait on :class:`Signal`s that these methods fire.

Job lifecycle (as the Actions service runs it)::

    queued --acquire--> acquired --(service assigns)--> assigned --runner starts--> running
       |                                                    |                         |
       +-- JobAvailable to each matching scale set          +-- JobAssigned           +-- JobStarted
                                                                   completed <------+-- JobCompleted
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from gharc.api.scaleset.scalesetname import scale_set_name_problem
from testworld.sim.github.signal import Signal

ZERO_TIME = "0001-01-01T00:00:00Z"
#: An outbox entry that ends the message being packed (see ``FakeGitHubState.next_message``).
BATCH_END: dict[str, Any] = {}
SELF_HOSTED = "self-hosted"


def rfc3339(ts: float | None) -> str:
    if ts is None:
        return ZERO_TIME
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


class StateError(Exception):
    """A request the real service would refuse; handlers render it in the right dialect.

    ``type_key`` is the Actions service exception name (None for plain REST errors).
    """

    def __init__(self, status: int, message: str, type_key: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type_key = type_key


def _check_scale_set_name(name: str) -> None:
    problem = scale_set_name_problem(name)
    if problem is not None:
        raise StateError(400, f"The runner scale set name {problem}.", "ArgumentException")


@dataclass
class RateBucket:
    limit: int = 5000
    used: int = 0
    reset_at: float = 0.0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


@dataclass
class Pat:
    token: str
    login: str
    orgs: set[str] | None  # None: every org and enterprise
    bucket: RateBucket = field(default_factory=RateBucket)
    revoked: bool = False


@dataclass
class App:
    app_id: int
    private_key_pem: str
    public_key_pem: str
    installations: dict[int, str]  # installation id -> account (org or enterprise name)
    client_id: str = ""  # ``Iv23li...``: GitHub takes it, or the app id, as a JWT's ``iss``


@dataclass
class InstallationToken:
    token: str
    app_id: int
    installation_id: int
    account: str
    expires_at: float
    bucket: RateBucket = field(default_factory=RateBucket)
    revoked: bool = False


@dataclass
class Tenant:
    """One Actions service tenant: what a config URL's scope maps to."""

    id: int
    kind: str  # "org" | "repo" | "enterprise"
    name: str  # org, owner/repo or enterprise
    runner_groups: dict[int, str] = field(default_factory=lambda: {1: "Default"})


@dataclass
class ScaleSet:
    id: int
    tenant: int
    name: str
    runner_group_id: int
    labels: list[str]
    runner_setting: dict[str, Any]
    created_on: float
    outbox: list[dict[str, Any]] = field(default_factory=list)
    messages: list[tuple[int, str]] = field(default_factory=list)  # (id, body) not yet acked
    signal: Signal = field(default_factory=Signal)
    delivered_statistics: dict[str, int] | None = None  # for ``lagging_statistics``


@dataclass
class Session:
    id: str
    scale_set_id: int
    owner: str
    queue_token: str
    queue_token_expires_at: float
    last_seen: float
    polls_in_flight: int = 0


@dataclass
class Runner:
    id: int
    name: str
    tenant: int
    scale_set_id: int | None
    labels: list[str]
    token: str
    ephemeral: bool = True
    os: str = "linux"
    online: bool = False
    job: int | None = None  # runnerRequestId
    signal: Signal = field(default_factory=Signal)
    polls_in_flight: int = 0
    last_seen: float = 0.0
    redeemed: bool = False  # a process connected with its JIT config (single-use)


@dataclass
class Job:
    request_id: int
    job_id: str
    numeric_id: int
    run_id: int
    owner: str
    repo: str
    workflow_name: str
    display_name: str
    labels: list[str]
    event_name: str
    duration: float
    result: str
    queue_time: float
    status: str = "queued"  # queued|acquired|assigned|running|completed
    offered_to: set[int] = field(default_factory=set)
    scale_set_id: int | None = None
    runner_id: int | None = None
    runner_name: str | None = None
    scale_set_assign_time: float | None = None
    runner_assign_time: float | None = None
    start_time: float | None = None
    finish_time: float | None = None
    conclusion: str | None = None
    cancel_requested: bool = False
    assigned_at: float | None = None  # when its current assignment to a scale set began
    reassignments: int = 0  # times the service took it back from its scale set
    reassign_at: float | None = None  # taken back: not assigned again before this

    @property
    def full_repo(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def workflow_ref(self) -> str:
        return (
            f"{self.owner}/{self.repo}/.github/workflows/{self.workflow_name}.yml@refs/heads/main"
        )


@dataclass
class WorkflowRun:
    id: int
    owner: str
    repo: str
    name: str
    created_at: float
    jobs: list[int] = field(default_factory=list)  # request ids


#: Seconds a message session may go without a poll or refresh before the service drops it
#: (a listener that died without deleting its session). GitHub does not document the
#: value; one experiment saw a session dropped after about 90 s, so two minutes is
#: modelled. Configurable per fake: ``state.session_idle_timeout`` (None: never).
SESSION_IDLE_TIMEOUT = 120.0

#: Seconds a runner holding a job may go without contacting the service (a poll, a job
#: renewal, any runner call) before the service counts it lost, as GitHub does when a
#: runner's machine dies: a job it started is failed ("The self-hosted runner lost
#: communication with the server"), one it was given but never started goes back to be
#: taken by another runner. GitHub gives up after about ten minutes. Configurable per
#: fake: ``state.runner_lost_timeout`` (None: never).
RUNNER_LOST_TIMEOUT = 600.0

#: Seconds a job assigned to a scale set may wait for one of its runners before the service
#: takes it back (JobCompleted ``canceled``) and assigns it again (JobAssigned): listener
#: logs in ARC #4602 show the attempts about five minutes apart. Configurable per fake:
#: ``state.reassign_after`` (None: never).
REASSIGN_AFTER = 300.0
#: Seconds between taking a job back and assigning it again; the job is then acquired, not
#: assigned, so ``totalAssignedJobs`` dips. GitHub does not document it.
REASSIGN_GAP = 2.0
#: How many times the service reassigns one job before it leaves it assigned
#: (actions-service-api.md section 9: up to 3).
REASSIGN_LIMIT = 3


class FakeGitHubState:
    """All mutable state of one fake GitHub, and the rules that change it."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.base_url = "http://127.0.0.1:0"
        self.poll_timeout = 50.0
        self.runner_poll_timeout = 50.0
        self.rest_max_age = 60
        self.admin_token_ttl = 3600.0
        self.queue_token_ttl = 3600.0
        self.installation_token_ttl = 3600.0
        self.registration_token_ttl = 3600.0
        self.session_idle_timeout: float | None = SESSION_IDLE_TIMEOUT
        self.runner_lost_timeout: float | None = RUNNER_LOST_TIMEOUT
        #: Job messages in one queue message at most: the service truncates a delivery
        #: there, and the job messages past it are never delivered (a scaler must count
        #: from ``statistics``). ``truncated`` counts those dropped.
        self.message_batch = 50
        self.truncated = 0
        self.truncate_deliveries = True
        self.reassign_after: float | None = REASSIGN_AFTER
        self.reassign_gap = REASSIGN_GAP
        self.reassign_limit = REASSIGN_LIMIT
        #: A query string the session's ``messageQueueUrl`` carries (e.g. ``"rid=1"``);
        #: queue calls without it are refused (see :meth:`check_queue_query`).
        self.queue_url_query = ""
        # Behaviours of the real service that listeners must survive (off by default; see
        # actions-service-api.md section 9 and docs/sim-github.md "Service quirks"):
        #: The first this many assignments of every job are taken back whether or not a
        #: runner would take it (runners are not given it meanwhile), each after
        #: ``reassign_after`` (``REASSIGN_AFTER`` when that is None): JobAssigned, then
        #: JobCompleted ``canceled``, then JobAssigned again (GitHub: up to 3).
        self.reassign_times = 0
        #: A message carries the statistics of the delivery before it, not its own (ARC
        #: #3420): a batch's body can be ahead of its counts.
        self.lagging_statistics = False
        #: github.com's flow: a job is assigned straight to the first matching scale set
        #: (JobAssigned only), without JobAvailable or an acquire call.
        self.skip_acquire = False
        #: ``runnerRequestId`` is 0 in every job message but JobAvailable (since mid-2025).
        self.zero_request_ids = False
        self.jwt_secret = secrets.token_hex(32)
        self.enterprises: dict[str, set[str]] = {}
        self.orgs: dict[str, str | None] = {}  # org -> enterprise
        self.repos: set[str] = set()  # owner/name
        self.pats: dict[str, Pat] = {}
        self.apps: dict[int, App] = {}
        self.installation_tokens: dict[str, InstallationToken] = {}
        self.registration_tokens: dict[str, tuple[int, float]] = {}  # token -> tenant, exp
        self.admin_tokens: dict[str, tuple[int, float]] = {}  # jwt -> tenant, exp
        self.tenants: dict[int, Tenant] = {}
        self.scale_sets: dict[int, ScaleSet] = {}
        self.sessions: dict[str, Session] = {}
        self.runners: dict[int, Runner] = {}
        self.jobs: dict[int, Job] = {}
        #: Every JIT registration handed out, in order: (runner name, runner id, when).
        #: A runner's name registered twice is one runner whose first answer was lost.
        self.jit_issued: list[tuple[str, int, float]] = []
        self.runs: dict[int, WorkflowRun] = {}
        self.removed_runners: list[int] = []
        #: Runner processes whose registration was deleted server-side (by token).
        self.ghosts: dict[str, Runner] = {}
        self.last_max_capacity: dict[int, int] = {}  # scale set -> X-ScaleSetMaxCapacity
        self.unhandled_errors = 0
        self._ids: dict[str, int] = {}
        self.changed = Signal()
        #: Called with (job, "queued"|"in_progress"|"completed") on each job transition;
        #: the webhook deliverer (webhooks.py) subscribes here.
        self.job_observers: list[Callable[[Job, str], None]] = []

    def notify_job(self, job: Job, action: str) -> None:
        for observer in list(self.job_observers):
            observer(job, action)

    # ---- ids and helpers ----------------------------------------------------------------

    def next_id(self, kind: str, start: int = 1) -> int:
        value = self._ids.get(kind, start - 1) + 1
        self._ids[kind] = value
        return value

    def now(self) -> float:
        return self.clock()

    # ---- accounts -----------------------------------------------------------------------

    def create_enterprise(self, name: str) -> None:
        self.enterprises.setdefault(name, set())

    def create_org(self, name: str, enterprise: str | None = None) -> None:
        if enterprise is not None:
            self.create_enterprise(enterprise)
            self.enterprises[enterprise].add(name)
        self.orgs[name] = enterprise

    def create_repo(self, full_name: str) -> None:
        owner, _, repo = full_name.partition("/")
        if not owner or not repo or "/" in repo:
            raise StateError(422, f"repository must be owner/name, not {full_name!r}")
        if owner not in self.orgs:
            self.create_org(owner)
        self.repos.add(full_name)

    def create_pat(
        self,
        token: str | None = None,
        *,
        login: str = "octocat",
        orgs: list[str] | None = None,
        rate_limit: int = 5000,
    ) -> str:
        token = token or f"ghp_{secrets.token_hex(18)}"
        self.pats[token] = Pat(
            token, login, set(orgs) if orgs is not None else None, RateBucket(limit=rate_limit)
        )
        return token

    def create_app(self, account: str) -> tuple[int, int, str]:
        """Register a GitHub App installed on ``account``; returns (app id, installation id,
        private key PEM) for the client to use."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public_pem = (
            key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        app_id = self.next_id("app", 1000)
        installation_id = self.next_id("installation", 5000)
        client_id = f"Iv23li{secrets.token_hex(7)}"
        self.apps[app_id] = App(
            app_id, private_pem, public_pem, {installation_id: account}, client_id
        )
        return app_id, installation_id, private_pem

    def app_by_issuer(self, issuer: object) -> App:
        """The App a JWT's ``iss`` names: its app id (a number, or its digits as text) or
        its client id, as GitHub accepts both (and recommends the client id)."""
        if isinstance(issuer, int) and not isinstance(issuer, bool):
            app = self.apps.get(issuer)
        elif isinstance(issuer, str) and issuer.isdigit():
            app = self.apps.get(int(issuer))
        else:
            app = next((a for a in self.apps.values() if a.client_id == issuer), None)
        if app is None:
            raise KeyError(issuer)
        return app

    def issue_installation_token(self, app_id: int, installation_id: int) -> InstallationToken:
        app = self.apps[app_id]
        token = InstallationToken(
            f"ghs_{secrets.token_hex(18)}",
            app_id,
            installation_id,
            app.installations[installation_id],
            self.now() + self.installation_token_ttl,
        )
        self.installation_tokens[token.token] = token
        return token

    def revoke_token(self, token: str) -> None:
        """Revoke a PAT, installation, admin or queue token (the next use gets 401)."""
        if token in self.pats:
            self.pats[token].revoked = True
        if token in self.installation_tokens:
            self.installation_tokens[token].revoked = True
        self.admin_tokens.pop(token, None)
        self.registration_tokens.pop(token, None)
        for s in self.sessions.values():
            if s.queue_token == token:
                s.queue_token_expires_at = 0.0

    def expire(self, kind: str) -> int:
        """Expire every token of ``kind`` (admin|queue|installation|registration); returns how
        many."""
        n = 0
        if kind == "admin":
            for tok, (tenant, _) in list(self.admin_tokens.items()):
                self.admin_tokens[tok] = (tenant, 0.0)
                n += 1
        elif kind == "queue":
            for s in self.sessions.values():
                s.queue_token_expires_at = 0.0
                n += 1
        elif kind == "installation":
            for t in self.installation_tokens.values():
                t.expires_at = 0.0
                n += 1
        elif kind == "registration":
            for tok, (tenant, _) in list(self.registration_tokens.items()):
                self.registration_tokens[tok] = (tenant, 0.0)
                n += 1
        else:
            raise StateError(422, f"unknown token kind {kind!r}")
        return n

    def exhaust_rate_limit(self, token: str | None = None, reset_in: float = 60.0) -> None:
        """Primary rate limit: remaining 0 until ``reset_in`` seconds from now."""
        buckets = [p.bucket for p in self.pats.values()] + [
            t.bucket for t in self.installation_tokens.values()
        ]
        if token is not None:
            principal = self.pats.get(token) or self.installation_tokens.get(token)
            if principal is None:
                raise StateError(404, "unknown token")
            buckets = [principal.bucket]
        for b in buckets:
            b.used = b.limit
            b.reset_at = self.now() + reset_in

    def charge(self, bucket: RateBucket) -> None:
        now = self.now()
        if bucket.reset_at <= now:
            bucket.used = 0
            bucket.reset_at = now + 3600
        bucket.used += 1

    # ---- tenants (scopes) ---------------------------------------------------------------

    def tenant_for(self, kind: str, name: str) -> Tenant:
        if kind == "org" and name not in self.orgs:
            raise StateError(404, "Not Found")
        if kind == "repo" and name not in self.repos:
            raise StateError(404, "Not Found")
        if kind == "enterprise" and name not in self.enterprises:
            raise StateError(404, "Not Found")
        for t in self.tenants.values():
            if t.kind == kind and t.name == name:
                return t
        t = Tenant(self.next_id("tenant"), kind, name)
        self.tenants[t.id] = t
        return t

    def tenant_from_config_url(self, url: str) -> Tenant:
        from urllib.parse import urlsplit

        parts = [p for p in urlsplit(url.strip()).path.split("/") if p]
        if len(parts) == 1:
            return self.tenant_for("org", parts[0])
        if len(parts) == 2 and parts[0].lower() == "enterprises":
            return self.tenant_for("enterprise", parts[1])
        if len(parts) == 2:
            return self.tenant_for("repo", f"{parts[0]}/{parts[1]}")
        raise StateError(404, "Not Found")

    def tenant_sees_repo(self, tenant: Tenant, full_repo: str) -> bool:
        owner = full_repo.split("/", 1)[0]
        if tenant.kind == "repo":
            return tenant.name == full_repo
        if tenant.kind == "org":
            return tenant.name == owner
        return self.orgs.get(owner) == tenant.name

    def principal_can_access(
        self, principal: Pat | InstallationToken, kind: str, name: str
    ) -> bool:
        org = name.split("/", 1)[0]
        if isinstance(principal, Pat):
            if principal.orgs is None:
                return True
            if kind == "enterprise":
                return False
            return org in principal.orgs
        account = principal.account
        if kind == "enterprise":
            return account == name
        return account == org or self.orgs.get(org) == account

    def service_url(self, tenant: Tenant) -> str:
        return f"{self.base_url}/_services/pipelines/t{tenant.id}/"

    # ---- registration and admin tokens --------------------------------------------------

    def create_registration_token(self, tenant: Tenant) -> tuple[str, float]:
        token = "A" + secrets.token_hex(14).upper()
        exp = self.now() + self.registration_token_ttl
        self.registration_tokens[token] = (tenant.id, exp)
        return token, exp

    def _registration_tenant(self, token: str, config_url: str) -> Tenant:
        """The tenant of ``config_url`` if ``token`` is a live registration token issued for
        it (401 / 403 as GitHub otherwise): redeeming a token and ``config.sh`` check alike."""
        entry = self.registration_tokens.get(token)
        if entry is None or entry[1] <= self.now():
            raise StateError(401, "Bad credentials")
        tenant = self.tenant_from_config_url(config_url)
        if tenant.id != entry[0]:
            raise StateError(403, "The registration token is not valid for this URL")
        return tenant

    def redeem_registration_token(self, token: str, config_url: str) -> tuple[str, str]:
        """runner-registration: (service URL, admin JWT) for a valid registration token."""
        import jwt

        tenant = self._registration_tenant(token, config_url)
        exp = self.now() + self.admin_token_ttl
        admin = jwt.encode(
            {
                "sub": f"t{tenant.id}",
                "iat": int(self.now()),
                "exp": int(exp),
                "jti": uuid.uuid4().hex,
            },
            self.jwt_secret,
            algorithm="HS256",
        )
        self.admin_tokens[admin] = (tenant.id, exp)
        return self.service_url(tenant), admin

    def check_admin_token(self, token: str, tenant_id: int) -> Tenant:
        entry = self.admin_tokens.get(token)
        if entry is None or entry[1] <= self.now() or entry[0] != tenant_id:
            raise StateError(401, "Unauthorized")
        return self.tenants[tenant_id]

    # ---- runner groups and scale sets ---------------------------------------------------

    def runner_groups(self, tenant: Tenant, name: str | None = None) -> list[tuple[int, str]]:
        return [
            (gid, gname)
            for gid, gname in sorted(tenant.runner_groups.items())
            if name is None or gname.lower() == name.lower()
        ]

    def add_runner_group(self, tenant: Tenant, name: str) -> int:
        gid = max(tenant.runner_groups) + 1
        tenant.runner_groups[gid] = name
        return gid

    def scale_set(self, tenant: Tenant, scale_set_id: int) -> ScaleSet:
        ss = self.scale_sets.get(scale_set_id)
        if ss is None or ss.tenant != tenant.id:
            raise StateError(
                404,
                f"The runner scale set with ID {scale_set_id} does not exist.",
                "RunnerScaleSetNotFoundException",
            )
        return ss

    def find_scale_sets(
        self, tenant: Tenant, group_id: int | None, name: str | None
    ) -> list[ScaleSet]:
        return [
            s
            for s in self.scale_sets.values()
            if s.tenant == tenant.id
            and (group_id is None or s.runner_group_id == group_id)
            and (name is None or s.name.lower() == name.lower())
        ]

    def create_scale_set(self, tenant: Tenant, body: dict[str, Any]) -> ScaleSet:
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise StateError(400, "The runner scale set name is required.", "ArgumentException")
        _check_scale_set_name(name)
        group_id = body.get("runnerGroupId") or 1
        if not isinstance(group_id, int) or group_id not in tenant.runner_groups:
            raise StateError(
                404, f"Runner group {group_id} not found.", "RunnerGroupNotFoundException"
            )
        if self.find_scale_sets(tenant, group_id, name):
            raise StateError(
                409,
                f"A runner scale set named '{name}' already exists.",
                "RunnerScaleSetExistsException",
            )
        ss = ScaleSet(
            id=self.next_id("scaleset"),
            tenant=tenant.id,
            name=name,
            runner_group_id=group_id,
            labels=self._labels(body.get("labels"), name),
            runner_setting=self._runner_setting(body),
            created_on=self.now(),
        )
        self.scale_sets[ss.id] = ss
        self._offer_queued_jobs(ss)
        return ss

    @staticmethod
    def _labels(raw: Any, name: str) -> list[str]:
        if raw is None:
            return [name]
        if not isinstance(raw, list) or not all(
            isinstance(x, dict) and isinstance(x.get("name"), str) for x in raw
        ):
            raise StateError(400, "labels must be a list of {type, name}", "ArgumentException")
        return [x["name"] for x in raw] or [name]

    @staticmethod
    def _runner_setting(body: dict[str, Any]) -> dict[str, Any]:
        raw = body.get("runnerSetting") or body.get("RunnerSetting") or {}
        if not isinstance(raw, dict):
            raise StateError(400, "runnerSetting must be an object", "ArgumentException")
        return {
            "ephemeral": bool(raw.get("ephemeral", True)),
            "isElastic": bool(raw.get("isElastic", True)),
            "disableUpdate": bool(raw.get("disableUpdate", False)),
        }

    def update_scale_set(self, tenant: Tenant, scale_set_id: int, body: dict[str, Any]) -> ScaleSet:
        ss = self.scale_set(tenant, scale_set_id)
        if body.get("name"):
            _check_scale_set_name(str(body["name"]))
            ss.name = str(body["name"])
        if body.get("runnerGroupId"):
            gid = body["runnerGroupId"]
            if gid not in tenant.runner_groups:
                raise StateError(
                    404, f"Runner group {gid} not found.", "RunnerGroupNotFoundException"
                )
            ss.runner_group_id = gid
        if body.get("labels"):
            ss.labels = self._labels(body["labels"], ss.name)
        if "runnerSetting" in body or "RunnerSetting" in body:
            ss.runner_setting = self._runner_setting(body)
        self._offer_queued_jobs(ss)
        return ss

    def delete_scale_set(self, scale_set_id: int) -> None:
        """Delete a scale set with its session and runners (also the fault 'scale set gone')."""
        ss = self.scale_sets.pop(scale_set_id, None)
        if ss is None:
            return
        for sid in [s.id for s in self.sessions.values() if s.scale_set_id == scale_set_id]:
            del self.sessions[sid]
        for r in [r for r in self.runners.values() if r.scale_set_id == scale_set_id]:
            self._drop_runner(r)
        for job in self.jobs.values():
            job.offered_to.discard(scale_set_id)
            if job.scale_set_id == scale_set_id and job.status in ("acquired", "assigned"):
                job.status, job.scale_set_id = "queued", None
        ss.signal.fire()
        self.changed.fire()

    # ---- statistics ---------------------------------------------------------------------

    def statistics(self, ss: ScaleSet) -> dict[str, int]:
        jobs = self.jobs.values()
        runners = [r for r in self.runners.values() if r.scale_set_id == ss.id]
        busy = sum(1 for r in runners if r.job is not None)
        return {
            "totalAvailableJobs": sum(
                1 for j in jobs if j.status == "queued" and ss.id in j.offered_to
            ),
            "totalAcquiredJobs": sum(
                1 for j in jobs if j.status == "acquired" and j.scale_set_id == ss.id
            ),
            "totalAssignedJobs": sum(
                1 for j in jobs if j.status in ("assigned", "running") and j.scale_set_id == ss.id
            ),
            "totalRunningJobs": sum(
                1 for j in jobs if j.status == "running" and j.scale_set_id == ss.id
            ),
            "totalRegisteredRunners": len(runners),
            "totalBusyRunners": busy,
            "totalIdleRunners": len(runners) - busy,
        }

    # ---- sessions -----------------------------------------------------------------------

    def session_expired(self, s: Session) -> bool:
        """Idle past ``session_idle_timeout``: no poll in flight, none begun or ended lately."""
        idle = self.session_idle_timeout
        return idle is not None and s.polls_in_flight == 0 and s.last_seen + idle < self.now()

    def _drop_session(self, s: Session) -> None:
        if self.sessions.pop(s.id, None) is not None:
            ss = self.scale_sets.get(s.scale_set_id)
            if ss is not None:
                ss.signal.fire()
            self.changed.fire()

    def drop_sessions(self, scale_set_id: int | None = None) -> int:
        """The service loses message sessions (of one scale set, or all), as on a service
        incident (ARC #3942): their polls answer 401 and refreshes 404, and the listeners
        must create new ones. Returns how many were dropped."""
        gone = [
            s
            for s in list(self.sessions.values())
            if scale_set_id is None or s.scale_set_id == scale_set_id
        ]
        for s in gone:
            self._drop_session(s)
        return len(gone)

    def active_session(self, ss: ScaleSet) -> Session | None:
        for s in list(self.sessions.values()):
            if s.scale_set_id == ss.id:
                if self.session_expired(s):
                    self._drop_session(s)
                    return None
                return s
        return None

    def create_session(self, tenant: Tenant, scale_set_id: int, owner: str) -> Session:
        ss = self.scale_set(tenant, scale_set_id)
        existing = self.active_session(ss)
        if existing is not None:
            raise StateError(
                409,
                f"The runner scale set {ss.name} already has an active session for owner "
                f"{existing.owner}.",
                "RunnerScaleSetSessionConflictException",
            )
        s = Session(
            str(uuid.uuid4()),
            ss.id,
            owner,
            secrets.token_urlsafe(32),
            self.now() + self.queue_token_ttl,
            self.now(),
        )
        self.sessions[s.id] = s
        return s

    def session(self, tenant: Tenant, scale_set_id: int, session_id: str) -> Session | None:
        """The live session, or None when it was dropped (expired, deleted) or never was."""
        self.scale_set(tenant, scale_set_id)
        s = self.sessions.get(session_id)
        if s is not None and self.session_expired(s):
            self._drop_session(s)
            s = None
        if s is None or s.scale_set_id != scale_set_id:
            return None
        return s

    def refresh_session(self, tenant: Tenant, scale_set_id: int, session_id: str) -> Session:
        """A gone session: 404 ``RunnerAdminException``, as the service answers a refresh of
        an evicted session (actions-service-api.md section 9)."""
        s = self.session(tenant, scale_set_id, session_id)
        if s is None:
            raise StateError(
                404, f"The message session {session_id} was not found.", "RunnerAdminException"
            )
        s.queue_token = secrets.token_urlsafe(32)
        s.queue_token_expires_at = self.now() + self.queue_token_ttl
        s.last_seen = self.now()
        return s

    def delete_session(self, tenant: Tenant, scale_set_id: int, session_id: str) -> None:
        """A gone session: 400 ``RunnerScaleSetSessionExpiredException``, not 404, as the
        service answers a listener deleting its predecessor's stale session."""
        s = self.session(tenant, scale_set_id, session_id)
        if s is None:
            raise StateError(
                400,
                f"The message session {session_id} has expired or does not exist.",
                "RunnerScaleSetSessionExpiredException",
            )
        del self.sessions[s.id]
        self.scale_sets[scale_set_id].signal.fire()

    def session_by_queue_token(self, session_id: str, token: str) -> tuple[Session, ScaleSet]:
        s = self.sessions.get(session_id)
        if s is not None and self.session_expired(s):
            self._drop_session(s)
            s = None
        if (
            s is None
            or not secrets.compare_digest(s.queue_token, token)
            or (s.queue_token_expires_at <= self.now())
        ):
            raise StateError(
                401,
                "The message queue access token is invalid or has expired.",
                "UnauthorizedRequestException",
            )
        ss = self.scale_sets.get(s.scale_set_id)
        if ss is None:
            raise StateError(401, "The session no longer exists.", "UnauthorizedRequestException")
        s.last_seen = self.now()
        return s, ss

    def queue_url(self, s: Session) -> str:
        query = f"?{self.queue_url_query}" if self.queue_url_query else ""
        return f"{self.base_url}/_services/broker/{s.id}/messages{query}"

    def check_queue_query(self, query: Mapping[str, str]) -> None:
        """With ``queue_url_query`` set, the queue answers only requests that kept it: a
        client must keep the query of the URL it was given (ARC's and GitHub's do)."""
        if not self.queue_url_query:
            return
        for key, value in parse_qsl(self.queue_url_query):
            if query.get(key) != value:
                raise StateError(
                    404, "The message queue URL lost its query string.", "NotFoundException"
                )

    # ---- messages -----------------------------------------------------------------------

    def _emit(self, ss_id: int, message: dict[str, Any]) -> None:
        ss = self.scale_sets.get(ss_id)
        if ss is None:
            return
        ss.outbox.append(message)
        ss.signal.fire()
        self.changed.fire()

    def next_message(self, ss: ScaleSet, last_message_id: int) -> tuple[int, str] | None:
        """The oldest unacknowledged message, packing the outbox into one if needed.

        A message ends at a :data:`BATCH_END` marker or at ``message_batch`` job messages;
        with ``truncate_deliveries`` the job messages pending past that are dropped, as the
        service truncates a response at 50 and never delivers the rest.
        """
        ss.messages = [m for m in ss.messages if m[0] > last_message_id]
        while not ss.messages and ss.outbox:
            end = ss.outbox.index(BATCH_END) if BATCH_END in ss.outbox else len(ss.outbox)
            take = min(end, self.message_batch)
            batch = ss.outbox[:take]
            if self.truncate_deliveries and end > take:
                self.truncated += end - take
                take = end
            ss.outbox = ss.outbox[take + 1 if take == end else take :]
            if batch:
                ss.messages.append((self.next_id("message"), json.dumps(batch)))
        return ss.messages[0] if ss.messages else None

    def message_statistics(self, ss: ScaleSet) -> dict[str, int]:
        """The statistics a delivered message carries: current ones, or with
        ``lagging_statistics`` those of the delivery before (zeros for the first)."""
        current = self.statistics(ss)
        if not self.lagging_statistics:
            return current
        lagged = ss.delivered_statistics or {k: 0 for k in current}
        ss.delivered_statistics = current
        return lagged

    def delete_message(self, ss: ScaleSet, message_id: int) -> None:
        before = len(ss.messages)
        ss.messages = [m for m in ss.messages if m[0] != message_id]
        if len(ss.messages) == before:
            raise StateError(404, f"Message {message_id} not found.", "MessageNotFoundException")

    def job_message(self, job: Job, kind: str) -> dict[str, Any]:
        zero_id = self.zero_request_ids and kind != "JobAvailable"
        msg: dict[str, Any] = {
            "messageType": kind,
            "runnerRequestId": 0 if zero_id else job.request_id,
            "repositoryName": job.repo,
            "ownerName": job.owner,
            "jobId": job.job_id,
            "jobWorkflowRef": job.workflow_ref,
            "jobDisplayName": job.display_name,
            "workflowRunId": job.run_id,
            "eventName": job.event_name,
            "requestLabels": list(job.labels),
            "queueTime": rfc3339(job.queue_time),
            "scaleSetAssignTime": rfc3339(job.scale_set_assign_time),
            "runnerAssignTime": rfc3339(job.runner_assign_time),
            "finishTime": rfc3339(job.finish_time),
        }
        if kind == "JobAvailable":
            ss = next(iter(sorted(job.offered_to)), None)
            tenant = self.tenants[self.scale_sets[ss].tenant] if ss in self.scale_sets else None
            base = self.service_url(tenant) if tenant else self.base_url + "/"
            msg["acquireJobUrl"] = f"{base}_apis/runtime/jobrequests/{job.request_id}/acquire"
        if kind in ("JobStarted", "JobCompleted"):
            msg["runnerId"] = job.runner_id or 0
            msg["runnerName"] = job.runner_name or ""
        if kind == "JobCompleted":
            msg["result"] = job.conclusion or ""
        return msg

    # ---- jobs ---------------------------------------------------------------------------

    @staticmethod
    def labels_match(job_labels: list[str], ss: ScaleSet) -> bool:
        have = {label.lower() for label in ss.labels} | {ss.name.lower(), SELF_HOSTED}
        return bool(job_labels) and all(label.lower() in have for label in job_labels)

    def _offer(self, job: Job, ss: ScaleSet) -> None:
        if ss.id in job.offered_to or job.status != "queued":
            return
        tenant = self.tenants[ss.tenant]
        if not self.tenant_sees_repo(tenant, job.full_repo) or not self.labels_match(
            job.labels, ss
        ):
            return
        job.offered_to.add(ss.id)
        if self.skip_acquire:
            # github.com: the service picks the scale set itself; nothing to acquire.
            job.status, job.scale_set_id = "acquired", ss.id
            job.scale_set_assign_time = self.now()
            self.assign_waiting(ss.id)
            return
        self._emit(ss.id, self.job_message(job, "JobAvailable"))

    def _offer_queued_jobs(self, ss: ScaleSet) -> None:
        for job in self.jobs.values():
            self._offer(job, ss)

    def enqueue_job(
        self,
        repo: str,
        labels: list[str],
        *,
        duration: float = 0.0,
        result: str = "succeeded",
        workflow_name: str = "ci",
        job_name: str = "build",
        event_name: str = "push",
        run_id: int | None = None,
    ) -> Job:
        if repo not in self.repos:
            self.create_repo(repo)
        owner, name = repo.split("/", 1)
        if run_id is None or run_id not in self.runs:
            run = WorkflowRun(
                run_id or self.next_id("run", 100), owner, name, workflow_name, self.now()
            )
            self.runs[run.id] = run
        else:
            run = self.runs[run_id]
        job = Job(
            request_id=self.next_id("request"),
            job_id=str(uuid.uuid4()),
            numeric_id=self.next_id("jobid", 9000),
            run_id=run.id,
            owner=owner,
            repo=name,
            workflow_name=workflow_name,
            display_name=job_name,
            labels=list(labels),
            event_name=event_name,
            duration=duration,
            result=result,
            queue_time=self.now(),
        )
        self.jobs[job.request_id] = job
        run.jobs.append(job.request_id)
        for ss in list(self.scale_sets.values()):
            self._offer(job, ss)
        for r in list(self.runners.values()):
            if r.scale_set_id is None:
                r.signal.fire()  # a legacy runner long-polling for a job by its labels
        self.notify_job(job, "queued")
        self.changed.fire()
        return job

    def acquirable_jobs(self, ss: ScaleSet) -> list[Job]:
        return [j for j in self.jobs.values() if j.status == "queued" and ss.id in j.offered_to]

    def acquire_jobs(self, ss: ScaleSet, request_ids: list[int]) -> list[int]:
        acquired = []
        for rid in request_ids:
            job = self.jobs.get(rid)
            if job is None or job.status != "queued" or ss.id not in job.offered_to:
                continue
            job.status, job.scale_set_id = "acquired", ss.id
            job.scale_set_assign_time = self.now()
            acquired.append(rid)
        self.assign_waiting(ss.id)
        return acquired

    def capacity_left(self, ss_id: int) -> int | None:
        """How many more jobs the service may assign to the scale set: the capacity its
        listener last sent (``X-ScaleSetMaxCapacity``) less the jobs assigned or running
        there; None when no capacity was ever sent (no limit)."""
        cap = self.last_max_capacity.get(ss_id)
        if cap is None:
            return None
        held = sum(
            1
            for j in self.jobs.values()
            if j.scale_set_id == ss_id and j.status in ("assigned", "running")
        )
        return cap - held

    def set_max_capacity(self, ss_id: int, capacity: int) -> None:
        """A poll's ``X-ScaleSetMaxCapacity``: jobs waiting for room may now be assigned."""
        self.last_max_capacity[ss_id] = capacity
        self.assign_waiting(ss_id)

    def assign_waiting(self, ss_id: int) -> None:
        """Assign the scale set's acquired jobs, oldest first, within its capacity: a job
        past it stays acquired (queued, for GitHub's UI) until a job of the set ends or the
        listener sends a larger capacity. A job taken back waits ``reassign_gap`` first."""
        left = self.capacity_left(ss_id)
        now = self.now()
        for job in sorted(self.jobs.values(), key=lambda j: j.request_id):
            if left is not None and left <= 0:
                return
            if job.status != "acquired" or job.scale_set_id != ss_id:
                continue
            if job.reassign_at is not None and job.reassign_at > now:
                continue
            self._assign(job)
            if left is not None:
                left -= 1

    def _assign(self, job: Job) -> None:
        """The service assigns an acquired job to its scale set (``JobAssigned``); if no
        runner of the set takes it in ``reassign_after``, :meth:`sweep` takes it back."""
        job.status, job.assigned_at, job.reassign_at = "assigned", self.now(), None
        assert job.scale_set_id is not None
        self._emit(job.scale_set_id, self.job_message(job, "JobAssigned"))
        for r in self.runners.values():
            if r.scale_set_id == job.scale_set_id:
                r.signal.fire()

    def _forced_reassignment(self, job: Job) -> bool:
        """The ``reassign_times`` quirk holds this assignment back from runners."""
        return job.reassignments < self.reassign_times

    def _reassign_due(self, job: Job, now: float) -> bool:
        if job.status != "assigned" or job.runner_id is not None:
            return False
        if job.scale_set_id is None or job.assigned_at is None:
            return False
        if self._forced_reassignment(job):
            wait = self.reassign_after if self.reassign_after is not None else REASSIGN_AFTER
        elif self.reassign_after is None or job.reassignments >= self.reassign_limit:
            return False
        else:
            wait = self.reassign_after
        return now - job.assigned_at >= wait

    def _take_back(self, job: Job) -> None:
        """No runner took the job: the service cancels this assignment (JobCompleted
        ``canceled``) and assigns the job again after ``reassign_gap``; meanwhile it is
        acquired, not assigned, and the set's ``totalAssignedJobs`` dips."""
        assert job.scale_set_id is not None
        job.reassignments += 1
        canceled = {**self.job_message(job, "JobCompleted"), "result": "canceled"}
        job.status, job.assigned_at = "acquired", None
        job.reassign_at = self.now() + self.reassign_gap
        self._emit(job.scale_set_id, canceled)

    def cancel_job(self, request_id: int) -> Job:
        job = self.job(request_id)
        if job.status == "completed":
            return job
        job.cancel_requested = True
        if job.status in ("queued", "acquired", "assigned") and job.runner_id is None:
            had_scale_set = job.scale_set_id
            self._finish(job, "canceled", announce=had_scale_set is not None)
        else:
            runner = self.runners.get(job.runner_id or 0)
            if runner is not None:
                runner.signal.fire()
        return job

    def job(self, request_id: int) -> Job:
        job = self.jobs.get(request_id)
        if job is None:
            raise StateError(404, f"Job request {request_id} not found.", "JobNotFoundException")
        return job

    def _finish(self, job: Job, conclusion: str, *, announce: bool = True) -> None:
        job.status, job.conclusion, job.finish_time = "completed", conclusion, self.now()
        self.notify_job(job, "completed")
        if announce and job.scale_set_id is not None:
            self._emit(job.scale_set_id, self.job_message(job, "JobCompleted"))
        runner = self.runners.get(job.runner_id or 0)
        if runner is not None and runner.job == job.request_id:
            runner.job = None
            if runner.ephemeral:
                self._drop_runner(runner)  # an ephemeral runner de-registers after its job
        if job.scale_set_id is not None:
            self.assign_waiting(job.scale_set_id)  # the job's room goes to a waiting one
        self.changed.fire()

    # ---- runners ------------------------------------------------------------------------

    def generate_jit_config(
        self, tenant: Tenant, scale_set_id: int, name: str, work_folder: str
    ) -> tuple[Runner, str]:
        ss = self.scale_set(tenant, scale_set_id)
        if not name:
            raise StateError(400, "The runner name is required.", "ArgumentException")
        if any(r.name == name and r.tenant == tenant.id for r in self.runners.values()):
            raise StateError(
                409, f"Agent exists with the name {name} in pool 0.", "AgentExistsException"
            )
        runner = Runner(
            self.next_id("runner"),
            name,
            tenant.id,
            ss.id,
            list(ss.labels),
            secrets.token_urlsafe(24),
            ephemeral=bool(ss.runner_setting.get("ephemeral", True)),
            last_seen=self.now(),  # the lost-runner timer runs from registration at least
        )
        self.runners[runner.id] = runner
        self.jit_issued.append((name, runner.id, self.now()))
        config = {
            "gharcFakeJitConfig": 1,
            "serverUrl": self.base_url,
            "runnerId": runner.id,
            "runnerName": runner.name,
            "runnerScaleSetId": ss.id,
            "workFolder": work_folder or "_work",
            "ephemeral": runner.ephemeral,
            "token": runner.token,
        }
        encoded = base64.b64encode(json.dumps(config).encode()).decode()
        self.changed.fire()
        return runner, encoded

    def register_static_runner(
        self, tenant: Tenant, name: str, labels: list[str], *, online: bool = True
    ) -> Runner:
        """A legacy (non scale set) runner registered with a registration token."""
        runner = Runner(
            self.next_id("runner"),
            name,
            tenant.id,
            None,
            labels,
            secrets.token_urlsafe(24),
            ephemeral=False,
            online=online,
            last_seen=self.now(),
        )
        self.runners[runner.id] = runner
        return runner

    # ---- legacy (registration-token) runners taking jobs by label ----------------------
    #: Labels GitHub gives every self-hosted runner besides its custom ones.
    DEFAULT_RUNNER_LABELS = ("self-hosted", "linux", "x64")

    def register_runner_with_token(
        self, token: str, config_url: str, name: str, labels: list[str], *, ephemeral: bool
    ) -> Runner:
        """``config.sh --url URL --token TOKEN --name NAME --labels ... [--ephemeral]
        --replace``: what a legacy runner pod (``summerwind/actions-runner``) does at start.

        The registration token must be live and issued for the URL's scope. A runner of the
        same name in the scope is replaced (``--replace``) unless it is running a job. The
        runner is online at once and takes queued jobs whose labels it carries
        (:meth:`take_job`); ephemeral ones de-register after their job.
        """
        tenant = self._registration_tenant(token, config_url)
        if not name:
            raise StateError(400, "The runner name is required.", "ArgumentException")
        for old in list(self.runners.values()):
            if old.tenant == tenant.id and old.name == name:
                if old.job is not None:
                    raise StateError(409, f"Agent {name} is running a job.", "AgentExistsException")
                self._drop_runner(old)
        runner = self.register_static_runner(tenant, name, list(labels))
        runner.ephemeral = ephemeral
        self.changed.fire()
        return runner

    def legacy_labels_match(self, job_labels: list[str], r: Runner) -> bool:
        have = {x.lower() for x in (*self.DEFAULT_RUNNER_LABELS, *r.labels)}
        return bool(job_labels) and all(x.lower() in have for x in job_labels)

    def _take_labelled_job(self, r: Runner) -> Job | None:
        """The oldest queued job no scale set holds that ``r``'s scope sees and whose
        labels ``r`` has: how GitHub hands jobs to registration-token runners."""
        tenant = self.tenants[r.tenant]
        for job in sorted(self.jobs.values(), key=lambda j: j.request_id):
            if (
                job.status == "queued"
                and job.scale_set_id is None
                and job.runner_id is None
                and self.tenant_sees_repo(tenant, job.full_repo)
                and self.legacy_labels_match(job.labels, r)
            ):
                job.status = "assigned"
                return self._hand_to(job, r)
        return None

    def runner(self, tenant: Tenant | None, runner_id: int) -> Runner:
        r = self.runners.get(runner_id)
        if r is None or (tenant is not None and r.tenant != tenant.id):
            raise StateError(
                404, f"Agent {runner_id} does not exist in pool 0.", "AgentNotFoundException"
            )
        return r

    def remove_runner(self, tenant: Tenant | None, runner_id: int) -> None:
        """Remove a runner; one already gone (an ephemeral runner de-registers after its job)
        is a success, as GitHub's client expects 204 and ARC removes every finished runner."""
        if runner_id in self.removed_runners and runner_id not in self.runners:
            return
        r = self.runner(tenant, runner_id)
        if r.job is not None:
            raise StateError(
                400,
                f"Agent {r.name} is running job {self.jobs[r.job].job_id} and cannot be removed.",
                "JobStillRunningException",
            )
        self._drop_runner(r)

    def delete_registration_keep_process(self, runner_id: int) -> Runner:
        """GitHub forgets a registration while its runner process lives on (ARC #4396,
        #4399: runners idle for hours while jobs queued). The process keeps its session:
        its polls are answered "no job" and it is never given one, as a real runner whose
        agent was deleted server-side sits idle; only a new registration can take jobs."""
        r = self.runners.pop(runner_id)
        self.removed_runners.append(r.id)
        self.ghosts[r.token] = r
        self.changed.fire()
        return r

    def is_ghost(self, r: Runner) -> bool:
        return self.ghosts.get(r.token) is r

    def _drop_runner(self, r: Runner) -> None:
        if self.runners.pop(r.id, None) is not None:
            self.removed_runners.append(r.id)
        r.online = False
        r.signal.fire()
        self.changed.fire()

    # ---- runner-side API ----------------------------------------------------------------

    def redeem_jit_config(self, encoded: str) -> Runner:
        try:
            config = json.loads(base64.b64decode(encoded, validate=True))
            runner_id, token = int(config["runnerId"]), str(config["token"])
        except Exception:
            raise StateError(400, "The JIT config is not valid.") from None
        r = self.runners.get(runner_id)
        if r is None or not secrets.compare_digest(r.token, token):
            raise StateError(401, "The runner registration no longer exists.")
        if r.redeemed:
            # A JIT config is single-use (ARC #4588): a second process with it (a lost pod
            # re-created from the same Secret) is refused with Conflict for as long as the
            # registration exists, and the real runner retries "until reconnected", idle.
            raise StateError(409, f"Runner {r.name} already has an active session.")
        r.redeemed = True
        r.online = True
        r.last_seen = self.now()
        self.changed.fire()
        return r

    def runner_by_token(self, token: str) -> Runner:
        """The runner a call authenticates as; any such call shows the runner is alive."""
        for r in self.runners.values():
            if secrets.compare_digest(r.token, token):
                r.last_seen = self.now()
                return r
        ghost = self.ghosts.get(token)
        if ghost is not None:
            return ghost
        raise StateError(401, "Bad credentials")

    # ---- the service's timers -----------------------------------------------------------

    def sweep(self) -> None:
        """What the service does on its own as time passes (the server calls this every
        second): drop idle message sessions, settle the jobs of lost runners, take back
        assignments no runner took and assign waiting jobs."""
        for s in list(self.sessions.values()):
            if self.session_expired(s):
                self._drop_session(s)
        lost = self.runner_lost_timeout
        for r in list(self.runners.values()):
            if lost is None:
                break
            if r.job is None or r.polls_in_flight > 0 or self.now() - r.last_seen < lost:
                continue
            job = self.jobs[r.job]
            r.online = False
            if job.status == "running":
                self._finish(job, "failed")
            else:
                self._release(job, r)
        now = self.now()
        waiting: set[int] = set()
        for job in list(self.jobs.values()):
            if self._reassign_due(job, now):
                self._take_back(job)
            if job.status == "acquired" and job.scale_set_id is not None:
                waiting.add(job.scale_set_id)
        for ss_id in sorted(waiting):
            self.assign_waiting(ss_id)

    def _release(self, job: Job, r: Runner) -> None:
        """A job given to a runner that was lost before starting it goes back: to its scale
        set, for another of its runners, or to the queue for a legacy runner."""
        r.job = None
        job.runner_id = job.runner_name = job.runner_assign_time = None
        job.assigned_at = self.now()  # its wait for a runner starts again
        if job.scale_set_id is None:
            job.status = "queued"
        for other in self.runners.values():
            if other.scale_set_id == job.scale_set_id:
                other.signal.fire()
        self.changed.fire()

    def take_job(self, r: Runner) -> Job | None:
        """Give the runner its job: the one it holds, else the oldest assigned to its set."""
        if r.id not in self.runners:
            raise StateError(401, "The runner was removed.")
        if r.job is not None:
            return self.jobs[r.job]
        if r.scale_set_id is None:
            return self._take_labelled_job(r)
        for job in sorted(self.jobs.values(), key=lambda j: j.request_id):
            if (
                job.status == "assigned"
                and job.scale_set_id == r.scale_set_id
                and job.runner_id is None
                and not self._forced_reassignment(job)
            ):
                return self._hand_to(job, r)
        return None

    def _hand_to(self, job: Job, r: Runner) -> Job:
        """``job`` becomes ``r``'s, as a scale set's runner or a labelled runner takes one:
        the same bookkeeping, and watchers are woken."""
        job.runner_id, job.runner_name = r.id, r.name
        job.runner_assign_time = self.now()
        r.job = job.request_id
        self.changed.fire()
        return job

    def _runner_job(self, r: Runner, request_id: int) -> Job:
        job = self.job(request_id)
        if job.runner_id != r.id:
            raise StateError(403, f"Job {request_id} is not assigned to runner {r.name}.")
        return job

    def job_started(self, r: Runner, request_id: int) -> Job:
        job = self._runner_job(r, request_id)
        if job.status == "assigned":
            job.status, job.start_time = "running", self.now()
            if job.scale_set_id is not None:  # a legacy runner's job has no scale set
                self._emit(job.scale_set_id, self.job_message(job, "JobStarted"))
            self.notify_job(job, "in_progress")
        return job

    def job_completed(self, r: Runner, request_id: int, result: str) -> Job:
        job = self._runner_job(r, request_id)
        if job.status == "completed":
            return job
        if job.status == "assigned":
            self.job_started(r, request_id)
        self._finish(job, "canceled" if job.cancel_requested else result)
        return job

    # ---- summaries (control API) --------------------------------------------------------

    def job_summary(self, job: Job) -> dict[str, Any]:
        return {
            "runnerRequestId": job.request_id,
            "jobId": job.job_id,
            "id": job.numeric_id,
            "runId": job.run_id,
            "repository": job.full_repo,
            "workflowName": job.workflow_name,
            "jobDisplayName": job.display_name,
            "labels": job.labels,
            "eventName": job.event_name,
            "durationSeconds": job.duration,
            "result": job.result,
            "status": job.status,
            "conclusion": job.conclusion,
            "scaleSetId": job.scale_set_id,
            "offeredTo": sorted(job.offered_to),
            "runnerId": job.runner_id,
            "runnerName": job.runner_name,
            "cancelRequested": job.cancel_requested,
            "queueTime": rfc3339(job.queue_time),
            "finishTime": rfc3339(job.finish_time) if job.finish_time else None,
        }

    def runner_summary(self, r: Runner) -> dict[str, Any]:
        return {
            "id": r.id,
            "name": r.name,
            "scaleSetId": r.scale_set_id,
            "labels": r.labels,
            "online": r.online,
            "busy": r.job is not None,
            "jobRequestId": r.job,
            "ephemeral": r.ephemeral,
        }

    def scale_set_summary(self, ss: ScaleSet) -> dict[str, Any]:
        s = self.active_session(ss)
        return {
            "id": ss.id,
            "name": ss.name,
            "tenant": self.tenants[ss.tenant].name,
            "runnerGroupId": ss.runner_group_id,
            "labels": ss.labels,
            "session": s.id if s else None,
            "statistics": self.statistics(ss),
            "pendingMessages": sum(1 for m in ss.outbox if m) + len(ss.messages),
        }

    def session_summary(self, s: Session) -> dict[str, Any]:
        return {"sessionId": s.id, "scaleSetId": s.scale_set_id, "ownerName": s.owner}
