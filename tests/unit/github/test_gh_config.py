from __future__ import annotations

import pytest

from gharc.github.config import InvalidConfigUrl, Scope, parse_config_url, server_url


@pytest.mark.parametrize(
    ("url", "scope", "ent", "org", "repo", "hosted", "rest"),
    [
        (
            "https://github.com/acme",
            Scope.ORGANIZATION,
            None,
            "acme",
            None,
            True,
            "https://api.github.com",
        ),
        (
            "https://github.com/acme/app/",
            Scope.REPOSITORY,
            None,
            "acme",
            "app",
            True,
            "https://api.github.com",
        ),
        (
            "https://github.com/enterprises/big",
            Scope.ENTERPRISE,
            "big",
            None,
            None,
            True,
            "https://api.github.com",
        ),
        (
            "https://www.github.com/acme",
            Scope.ORGANIZATION,
            None,
            "acme",
            None,
            True,
            "https://api.github.com",
        ),
        (
            "https://tenant.ghe.com/acme",
            Scope.ORGANIZATION,
            None,
            "acme",
            None,
            True,
            "https://api.tenant.ghe.com",
        ),
        (
            "https://ghes.example.com/Enterprises/big",
            Scope.ENTERPRISE,
            "big",
            None,
            None,
            False,
            "https://ghes.example.com/api/v3",
        ),
        (
            "http://127.0.0.1:8080/octo-org",
            Scope.ORGANIZATION,
            None,
            "octo-org",
            None,
            False,
            "http://127.0.0.1:8080/api/v3",
        ),
        (
            "https://ghes.example.com:8443/o/r",
            Scope.REPOSITORY,
            None,
            "o",
            "r",
            False,
            "https://ghes.example.com:8443/api/v3",
        ),
    ],
)
def test_parse_valid(
    url: str,
    scope: Scope,
    ent: str | None,
    org: str | None,
    repo: str | None,
    hosted: bool,
    rest: str,
) -> None:
    c = parse_config_url(url)
    assert (c.scope, c.enterprise, c.organization, c.repository) == (scope, ent, org, repo)
    assert c.is_hosted is hosted
    assert c.rest_base_url == rest
    assert not c.config_url.endswith("/")


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "github.com/acme",
        "ftp://github.com/acme",
        "https://github.com",
        "https://github.com/",
        "https://github.com/a/b/c",
        "https://github.com/enterprises",
        "https://github.com/a//b",
        "https://user:pw@github.com/acme",
        "https://github.com/acme?x=1",
        "https://github.com:notaport/acme",
    ],
)
def test_parse_invalid_names_accepted_forms(url: str) -> None:
    with pytest.raises(InvalidConfigUrl) as info:
        parse_config_url(url)
    assert "enterprises/<enterprise>" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_credentials_in_url_not_echoed() -> None:
    with pytest.raises(InvalidConfigUrl) as info:
        parse_config_url("https://user:hunter2@github.com/acme")
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in info.value.url


def test_scope_key() -> None:
    assert parse_config_url("https://github.com/a/b").scope_key == "repo=a/b"
    assert parse_config_url("https://github.com/enterprises/e").scope_key == "enterprise=e"


@pytest.mark.parametrize(
    ("enterprise_url", "api_url", "want"),
    [
        ("", "", "https://github.com"),
        ("", "https://api.github.com/", "https://github.com"),
        ("", "https://API.github.com", "https://github.com"),
        ("", "https://ghes.example.com/api/v3/", "https://ghes.example.com"),
        ("", " http://127.0.0.1:8080 ", "http://127.0.0.1:8080"),
        (
            "https://ghes.example.com/",
            "https://ignored.example.com/api/v3",
            "https://ghes.example.com",
        ),
        (" https://ghes.example.com/api/v3/ ", "", "https://ghes.example.com"),
    ],
)
def test_server_url_one_normalisation(enterprise_url: str, api_url: str, want: str) -> None:
    """The controller's and the webhook server's GitHub host, from ARC's two settings."""
    assert server_url(enterprise_url, api_url) == want
