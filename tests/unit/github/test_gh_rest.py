"""RestClient against the fake: caching (B6), pagination, rate limits, proxies, metrics."""

from __future__ import annotations

import time

import httpx
import pytest
from gh_helpers import FAST_RETRY, FakeTime

from gharc.github import GitHubMetrics, PersonalAccessToken, RestClient, RetryPolicy
from gharc.github import errors as gherrors
from gharc.github.config import parse_config_url
from gharc.github.transport import make_http_client, ssl_context
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer

RUNNERS = "/api/v3/orgs/{org}/actions/runners"


def _rest(gh: FakeGitHubServer, metrics: GitHubMetrics, **kw: object) -> RestClient:
    kw.setdefault("retry", FAST_RETRY)
    return RestClient(
        parse_config_url(gh.config_url()), PersonalAccessToken(gh.token), metrics=metrics, **kw
    )  # type: ignore[arg-type]


@pytest.fixture
async def rest(gh: FakeGitHubServer, metrics: GitHubMetrics):  # type: ignore[no-untyped-def]
    client = _rest(gh, metrics)
    yield client
    await client.aclose()


def _tenant(gh: FakeGitHubServer):  # type: ignore[no-untyped-def]
    return gh.state.tenant_for("org", "octo-org")


async def test_registration_token_cached(rest: RestClient, gh: FakeGitHubServer) -> None:
    a = await rest.create_registration_token()
    b = await rest.create_registration_token()
    assert a.token == b.token and a.expires_at.timestamp() > time.time() + 3000
    assert gh.calls("*/registration-token", status=201) == 1
    c = await rest.create_registration_token(force=True)
    assert c.token != a.token


async def test_registration_token_refetched_near_expiry(
    gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    t = FakeTime(time.time())
    client = _rest(gh, metrics, clock=t.clock)
    try:
        await client.create_registration_token()
        t.now += 1900  # less than the 30 min margin left
        await client.create_registration_token()
        assert gh.calls("*/registration-token", status=201) == 2
    finally:
        await client.aclose()


async def test_list_runners_all_pages(rest: RestClient, gh: FakeGitHubServer) -> None:
    tenant = _tenant(gh)
    for i in range(150):
        gh.state.register_static_runner(tenant, f"static-{i}", ["linux"])
    runners = await rest.list_runners()
    assert [r.name for r in runners] == [f"static-{i}" for i in range(150)]
    assert runners[0].status == "online" and runners[0].labels[0].name == "self-hosted"
    assert gh.calls(RUNNERS, status=200) == 2


async def test_cache_hit_within_max_age(
    rest: RestClient, gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    gh.state.register_static_runner(_tenant(gh), "one", ["linux"])
    first = await rest.list_runners()
    second = await rest.list_runners()
    assert first == second
    assert gh.calls(RUNNERS) == 1  # the second never reached the fake
    assert metrics.count("/orgs/{org}/actions/runners", "GET", 200) == 1


async def test_etag_revalidation_is_304(
    rest: RestClient, gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    gh.state.rest_max_age = 0  # every reuse must be revalidated
    gh.state.register_static_runner(_tenant(gh), "one", ["linux"])
    first = await rest.list_runners()
    remaining = gh.state.pats[gh.token].bucket.remaining
    second = await rest.list_runners()
    assert [r.name for r in second] == [r.name for r in first] == ["one"]
    assert gh.calls(RUNNERS, status=200) == 1
    assert gh.calls(RUNNERS, status=304) == 1
    assert gh.state.pats[gh.token].bucket.remaining == remaining  # 304 is free
    assert metrics.count("/orgs/{org}/actions/runners", "GET", 304) == 1
    gh.state.register_static_runner(_tenant(gh), "two", ["linux"])
    third = await rest.list_runners()
    assert [r.name for r in third] == ["one", "two"]  # changed body: new ETag, 200


async def test_a_fresh_list_sees_a_registration_made_within_max_age(
    rest: RestClient, gh: FakeGitHubServer
) -> None:
    gh.state.register_static_runner(_tenant(gh), "one", ["linux"])
    await rest.list_runners()
    gh.state.register_static_runner(_tenant(gh), "two", ["linux"])
    assert [r.name for r in await rest.list_runners()] == ["one"]  # cached, max-age 60 s
    fresh = await rest.list_runners(fresh=True)
    assert [r.name for r in fresh] == ["one", "two"]
    again = await rest.list_runners(fresh=True)  # unchanged: revalidated, 304, no quota
    assert [r.name for r in again] == ["one", "two"]
    assert gh.calls(RUNNERS, status=200) == 2 and gh.calls(RUNNERS, status=304) == 1


async def test_cache_shared_per_scope_and_credential(
    gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    from gharc.github import ClientPool

    pool = ClientPool(metrics=metrics, retry=FAST_RETRY)
    try:
        other = gh.state.create_pat()
        a = pool.get_rest(gh.config_url(), PersonalAccessToken(gh.token))
        b = pool.get_rest(gh.config_url(), PersonalAccessToken(other))
        await a.list_runners()
        await a.list_runners()
        await b.list_runners()  # another credential: its own cache entry
        assert gh.calls(RUNNERS) == 2
    finally:
        await pool.aclose()


async def test_remove_runner(rest: RestClient, gh: FakeGitHubServer) -> None:
    tenant = _tenant(gh)
    idle = gh.state.register_static_runner(tenant, "idle", ["linux"])
    await rest.remove_runner(idle.id)
    assert idle.id not in gh.state.runners
    with pytest.raises(gherrors.NotFound):
        await rest.remove_runner(idle.id)


async def test_remove_busy_runner_is_422(rest: RestClient, gh: FakeGitHubServer) -> None:
    from gharc.github import ActionsClient

    actions = ActionsClient(
        rest.config,
        rest.credentials,
        rest=rest,
        retry=FAST_RETRY,
        metrics=GitHubMetrics(__import__("prometheus_client").CollectorRegistry()),
    )
    from gharc.github.models import RunnerScaleSet

    ss = await actions.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
    assert ss.id is not None
    session = await actions.create_message_session(ss.id, "x")
    job = gh.enqueue_job(DEFAULT_REPO, ["arc"])
    await actions.acquire_jobs(ss.id, session.message_queue_access_token, [job.request_id])
    jit = await actions.generate_jit_runner_config(ss.id, "busy-1")
    runner = gh.state.redeem_jit_config(jit.encoded_jit_config)
    assert gh.state.take_job(runner) is not None
    with pytest.raises(gherrors.UnprocessableEntity) as info:
        await rest.remove_runner(jit.runner.id)
    assert "still running a job" in str(info.value)
    await actions.aclose()


async def test_runner_groups(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    client = RestClient(
        parse_config_url(gh.config_url(repo="octo-repo")),
        PersonalAccessToken(gh.token),
        metrics=metrics,
    )
    try:
        groups = await client.list_runner_groups()
        assert [(g.id, g.name, g.default) for g in groups] == [(1, "Default", True)]
        assert gh.calls("/api/v3/orgs/{org}/actions/runner-groups") == 1
    finally:
        await client.aclose()


async def test_workflow_runs_and_jobs(rest: RestClient, gh: FakeGitHubServer) -> None:
    j1 = gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"], workflow_name="ci")
    gh.enqueue_job(DEFAULT_REPO, ["linux"], run_id=j1.run_id, job_name="test")
    runs = await rest.list_workflow_runs("octo-org", "octo-repo", "queued")
    assert [r.id for r in runs] == [j1.run_id] and runs[0].status == "queued"
    assert await rest.list_workflow_runs("octo-org", "octo-repo", "in_progress") == []
    jobs = await rest.list_workflow_jobs("octo-org", "octo-repo", j1.run_id)
    assert [(j.name, j.status, j.labels) for j in jobs] == [
        ("build", "queued", ["self-hosted", "linux"]),
        ("test", "queued", ["linux"]),
    ]
    with pytest.raises(gherrors.NotFound):
        await rest.list_workflow_jobs("octo-org", "octo-repo", 424242)


async def test_rate_limit_waited_out(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    t = FakeTime(time.time())

    def time_passes(_s: float) -> None:  # the reset arrives while we "sleep"
        gh.state.pats[gh.token].bucket.used = 0

    t.on_sleep = time_passes
    client = _rest(gh, metrics, clock=t.clock, sleep=t.sleep)
    try:
        gh.state.exhaust_rate_limit(gh.token, reset_in=30)
        await client.list_runners()
        assert len(t.sleeps) == 1 and 29 <= t.sleeps[0] <= 33, t.sleeps  # reset is whole seconds
        assert gh.calls(RUNNERS, status=403) == 1 and gh.calls(RUNNERS, status=200) == 1
        assert metrics.rate_limit_remaining.labels(scope="org=octo-org")._value.get() > 0
    finally:
        await client.aclose()


async def test_rate_limit_beyond_cap_raises(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    t = FakeTime(time.time())
    client = _rest(
        gh, metrics, clock=t.clock, sleep=t.sleep, retry=RetryPolicy(max_rate_limit_wait=60)
    )
    try:
        gh.state.exhaust_rate_limit(gh.token, reset_in=3600)
        with pytest.raises(gherrors.RateLimited) as info:
            await client.list_runners()
        assert t.sleeps == []
        assert info.value.reset_at is not None and info.value.reset_at > time.time() + 3000
        assert metrics.rate_limit_remaining.labels(scope="org=octo-org")._value.get() == 0
    finally:
        await client.aclose()


async def test_secondary_rate_limit_retry_after(
    gh: FakeGitHubServer, metrics: GitHubMetrics
) -> None:
    t = FakeTime(time.time())
    client = _rest(gh, metrics, clock=t.clock, sleep=t.sleep)
    try:
        gh.add_fault("secondary_rate_limit", route=RUNNERS, retry_after=7, count=1)
        await client.list_runners()
        assert t.sleeps == [7.0]
        gh.add_fault("secondary_rate_limit", route=RUNNERS, status=429, retry_after=3, count=1)
        await client.create_registration_token(force=True)  # not matched: no wait
        assert t.sleeps == [7.0]
    finally:
        await client.aclose()


@pytest.mark.looptime
async def test_backoff_on_5xx_uses_looptime(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    import asyncio

    client = _rest(gh, metrics, retry=RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=8.0))
    try:
        gh.add_fault("status", route="*/registration-token", status=502, count=3)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await client.create_registration_token()
        waited = loop.time() - start
        assert 0.5 + 1 + 2 <= waited <= 1 + 2 + 4 + 1  # jittered 1, 2, 4 s caps
        assert gh.calls("*/registration-token", status=502) == 3
    finally:
        await client.aclose()


async def test_forbidden_not_retried(gh: FakeGitHubServer, metrics: GitHubMetrics) -> None:
    gh.state.create_org("elsewhere")
    limited = gh.state.create_pat(orgs=["elsewhere"])
    client = RestClient(
        parse_config_url(gh.config_url()),
        PersonalAccessToken(limited),
        metrics=metrics,
        retry=FAST_RETRY,
    )
    try:
        with pytest.raises(gherrors.Forbidden) as info:
            await client.list_runners()
        assert limited not in str(info.value)
        assert gh.calls(RUNNERS) == 1
    finally:
        await client.aclose()


async def test_connection_errors_retried_then_raise(metrics: GitHubMetrics) -> None:
    attempts = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(201, json={"token": "t", "expires_at": "2099-01-01T00:00:00Z"})

    t = FakeTime(0)
    client = RestClient(
        parse_config_url("https://ghes.example/acme"),
        PersonalAccessToken("x"),
        metrics=metrics,
        transport=httpx.MockTransport(handler),
        sleep=t.sleep,
        retry=FAST_RETRY,
    )
    try:
        await client.create_registration_token()
        assert attempts == 3 and len(t.sleeps) == 2
        attempts = -100
        with pytest.raises(gherrors.ConnectionFailed):
            await client.create_registration_token(force=True)
    finally:
        await client.aclose()


async def test_proxy_env_and_no_proxy(
    gh: FakeGitHubServer, metrics: GitHubMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens on discard
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    via_proxy = make_http_client(metrics=metrics, scope="t", user_agent="t")
    try:
        with pytest.raises((httpx.ProxyError, httpx.ConnectError)):
            await via_proxy.get(gh.url + "/_fake/state")
    finally:
        await via_proxy.aclose()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    direct = make_http_client(metrics=metrics, scope="t", user_agent="t")
    try:
        assert (await direct.get(gh.url + "/_fake/state")).status_code == 200
    finally:
        await direct.aclose()


def test_ca_bundle_pem_and_path(tmp_path: object) -> None:
    import datetime
    import pathlib
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gharc test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    ctx = ssl_context(pem)
    assert not isinstance(ctx, bool)
    assert any(
        c.get("subject") == ((("commonName", "gharc test CA"),),) for c in ctx.get_ca_certs()
    )
    path = pathlib.Path(str(tmp_path)) / "ca.pem"
    path.write_text(pem)
    assert not isinstance(ssl_context(str(path)), bool)
    default = ssl_context(None)
    assert isinstance(default, ssl.SSLContext) and default.verify_mode == ssl.CERT_REQUIRED
    assert ssl_context(None) is default  # one per process: each costs 1-3 MiB of CA store
    with pytest.raises(ValueError):
        ssl_context("/no/such/file.pem")


@pytest.mark.relies_on("rest-304-free")
async def test_a_fresh_runs_listing_sees_a_job_queued_within_max_age(
    rest: RestClient, gh: FakeGitHubServer
) -> None:
    """The legacy queued-job poll lists fresh: from the HTTP cache a job queued since the
    last round would stay hidden for up to max-age (60 s); an unchanged listing is a 304."""
    owner, repo = DEFAULT_REPO.split("/")
    runs = "/api/v3/repos/{owner}/{repo}/actions/runs"
    assert await rest.list_workflow_runs(owner, repo, "queued") == []
    gh.enqueue_job(DEFAULT_REPO, ["self-hosted"])
    assert await rest.list_workflow_runs(owner, repo, "queued") == []  # cached
    fresh = await rest.list_workflow_runs(owner, repo, "queued", fresh=True)
    assert len(fresh) == 1
    remaining = gh.state.pats[gh.token].bucket.remaining
    again = await rest.list_workflow_runs(owner, repo, "queued", fresh=True)
    assert [r.id for r in again] == [r.id for r in fresh]
    assert gh.calls(runs, status=304) == 1
    assert gh.state.pats[gh.token].bucket.remaining == remaining  # the 304 was free
