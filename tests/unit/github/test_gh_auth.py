from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from gh_helpers import ClientFactory, FakeTime

from gharc.github import ActionsClient
from gharc.github import errors as gherrors
from gharc.github.auth import (
    AccessToken,
    AppTokenSource,
    CredentialsError,
    GitHubApp,
    PersonalAccessToken,
    credentials_from_secret_data,
)
from testworld.sim.github import FakeGitHubServer


def _pem() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    pub = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return priv, pub


PRIV, PUB = _pem()


def test_pat_secret_not_in_repr() -> None:
    pat = PersonalAccessToken("ghp_supersecret")
    assert "supersecret" not in repr(pat) and "supersecret" not in str(pat)
    assert pat.identity.startswith("pat:") and "supersecret" not in pat.identity
    assert PersonalAccessToken("ghp_supersecret").identity == pat.identity
    assert PersonalAccessToken("ghp_other").identity != pat.identity


def test_app_secret_not_in_repr() -> None:
    app = GitHubApp("123", "456", PRIV)
    body = PRIV.splitlines()[1]
    assert body not in repr(app) and "PRIVATE" not in repr(app)
    assert body not in app.identity


def test_app_jwt_claims() -> None:
    app = GitHubApp(123, 456, PRIV)
    now = 1_700_000_000.0
    claims = jwt.decode(
        app.make_jwt(now),
        PUB,
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["iss"] == "123"
    assert claims["iat"] == now - 60
    assert claims["exp"] - now <= 600
    assert claims["exp"] > now


def test_bad_private_key_message_has_no_key() -> None:
    fake = "-----BEGIN RSA PRIVATE KEY-----\nnotakeyatall\n-----END RSA PRIVATE KEY-----"
    app = GitHubApp(1, 2, fake)
    with pytest.raises(CredentialsError) as info:
        app.make_jwt(time.time())
    assert "notakeyatall" not in str(info.value)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"github_token": "ghp_x"}, PersonalAccessToken),
        ({"github_token": b"ghp_x\n"}, PersonalAccessToken),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": b"2",
                "github_app_private_key": PRIV,
            },
            GitHubApp,
        ),
    ],
)
def test_credentials_from_secret(data: dict[str, str | bytes], kind: type) -> None:
    assert isinstance(credentials_from_secret_data(data), kind)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({}, "no GitHub credentials"),
        ({"github_token": "  "}, "no GitHub credentials"),
        ({"github_token": "ghp_secret1", "github_app_id": "1"}, "exactly one"),
        ({"github_app_id": "1", "github_app_private_key": PRIV}, "github_app_installation_id"),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "x",
                "github_app_private_key": PRIV,
            },
            "must be a number",
        ),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "2",
                "github_app_private_key": "secretgarbage",
            },
            "not a PEM",
        ),
    ],
)
def test_credentials_errors(data: dict[str, str], needle: str) -> None:
    with pytest.raises(CredentialsError) as info:
        credentials_from_secret_data(data)
    assert needle in str(info.value)
    assert "ghp_secret1" not in str(info.value) and "secretgarbage" not in str(info.value)


async def test_app_token_source_caches_until_margin() -> None:
    t = FakeTime(1000.0)
    minted: list[str] = []

    async def exchange(app_jwt: str) -> AccessToken:
        minted.append(app_jwt)
        return AccessToken(f"tok{len(minted)}", t.now + 3600)

    src = AppTokenSource(GitHubApp(1, 2, PRIV), exchange, clock=t.clock, margin=300)
    assert await src.token() == "tok1"
    t.now += 3000
    assert await src.token() == "tok1"
    t.now += 400  # inside the margin
    assert await src.token() == "tok2"
    src.invalidate()
    assert await src.token() == "tok3"


async def test_app_installation_exchange_against_fake(
    gh: FakeGitHubServer, make_client: ClientFactory
) -> None:
    app_id, inst, pem = gh.state.create_app("octo-org")
    client: ActionsClient = make_client(credentials=GitHubApp(app_id, inst, pem))
    group = await client.get_runner_group_by_name("Default")
    assert group.id == 1
    await client.rest.list_runners()
    await client.rest.list_runner_groups()
    assert gh.calls("*/app/installations/{installation_id}/access_tokens", status=201) == 1
    assert len(gh.state.installation_tokens) == 1


@pytest.mark.pins("app-client-id")
async def test_app_client_id_as_issuer_against_fake(
    gh: FakeGitHubServer, make_client: ClientFactory
) -> None:
    # GitHub recommends the App's client id (Iv23li...) as the JWT issuer; ARC takes it in
    # github_app_id. The fake refused it with 401 before.
    app_id, inst, pem = gh.state.create_app("octo-org")
    client_id = gh.state.apps[app_id].client_id
    assert client_id.startswith("Iv23li")
    creds = credentials_from_secret_data(
        {
            "github_app_id": client_id,
            "github_app_installation_id": str(inst),
            "github_app_private_key": pem,
        }
    )
    client: ActionsClient = make_client(credentials=creds)
    await client.rest.list_runners()
    assert gh.calls("*/app/installations/{installation_id}/access_tokens", status=201) == 1
    stranger = make_client(credentials=GitHubApp("Iv23linotanapp00", inst, pem))
    with pytest.raises(gherrors.Unauthorized):
        await stranger.rest.list_runners()


async def test_app_for_other_org_is_refused(
    gh: FakeGitHubServer, make_client: ClientFactory
) -> None:
    gh.state.create_org("other-org")
    app_id, inst, pem = gh.state.create_app("other-org")
    client = make_client(credentials=GitHubApp(app_id, inst, pem))
    with pytest.raises(Exception) as info:
        await client.rest.create_registration_token()
    assert getattr(info.value, "status", None) == 403


async def test_app_wrong_key_is_unauthorized(
    gh: FakeGitHubServer, make_client: ClientFactory
) -> None:
    app_id, inst, _pem_unused = gh.state.create_app("octo-org")
    client = make_client(credentials=GitHubApp(app_id, inst, PRIV))  # not the app's key
    with pytest.raises(gherrors.Unauthorized) as info:
        await client.rest.list_runners()
    assert "BEGIN" not in str(info.value)


async def test_revoked_installation_token_is_reminted_once(
    gh: FakeGitHubServer, make_client: ClientFactory
) -> None:
    app_id, inst, pem = gh.state.create_app("octo-org")
    client = make_client(credentials=GitHubApp(app_id, inst, pem))
    await client.rest.list_runners()
    for tok in list(gh.state.installation_tokens):
        gh.state.revoke_token(tok)
    await client.rest.list_runner_groups()
    assert gh.calls("*/access_tokens", status=201) == 2
