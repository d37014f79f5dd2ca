"""spec.proxy for one client: which requests go through it, and which URLs cannot work."""

from __future__ import annotations

import httpx
import pytest

from gharc.github.auth import PersonalAccessToken
from gharc.github.pool import ClientPool
from gharc.github.proxy import InvalidProxyUrl, ProxySettings, check_proxy_url

SETTINGS = ProxySettings(
    http="http://u:p@127.0.0.1:3128",
    https="http://127.0.0.1:3129",
    no_proxy=("internal.example", ".corp", "10.0.0.0/8", "127.0.0.2:8080"),
)


@pytest.mark.parametrize(
    ("url", "proxy"),
    [
        ("http://github.example/api", "http://u:p@127.0.0.1:3128"),
        ("https://api.github.com/x", "http://127.0.0.1:3129"),
        ("https://internal.example/x", None),
        ("https://a.internal.example/x", None),
        ("https://x.corp/y", None),
        ("http://10.1.2.3/y", None),
        ("http://127.0.0.2:8080/y", None),
        ("http://127.0.0.2:9090/y", "http://u:p@127.0.0.1:3128"),
        ("https://notinternal.example/x", "http://127.0.0.1:3129"),
    ],
)
def test_requests_are_routed_like_go_httpproxy(url: str, proxy: str | None) -> None:
    assert SETTINGS.proxy_for(httpx.URL(url)) == proxy


def test_the_settings_never_print_a_password() -> None:
    assert "p@" not in repr(SETTINGS) and "u:p" not in repr(SETTINGS)


@pytest.mark.parametrize(
    "url", ["ftp://proxy:21", "proxy:3128", "http://", "http://proxy:99999", "http://proxy:0"]
)
def test_unusable_proxy_urls_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(InvalidProxyUrl) as info:
        check_proxy_url(url)
    assert url not in str(info.value)


async def test_the_pool_keys_clients_by_proxy() -> None:
    pool = ClientPool()
    token = PersonalAccessToken("t")
    direct = pool.get("https://github.com/o", token)
    via = pool.get("https://github.com/o", token, proxy=SETTINGS)
    again = pool.get("https://github.com/o", token, proxy=ProxySettings(**vars(SETTINGS)))
    other = pool.get("https://github.com/o", token, proxy=ProxySettings(http="http://h:1"))
    assert direct is not via and via is again and other is not via
    await pool.aclose()
