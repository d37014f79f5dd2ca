"""The ApiClient's HTTP session does no per-request environment lookups (issue 12)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from gharc.kube.config import new_api_client
from gharc.kube.leanconfig import environment_proxy

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true%s}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


def _kubeconfig(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG % extra)
    return str(path)


async def test_session_does_not_trust_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    api = await new_api_client(kubeconfig=_kubeconfig(tmp_path))
    try:
        assert api.rest_client.pool_manager.trust_env is False
        assert not api.rest_client.pool_manager.closed
        assert api.rest_client.proxy is None
    finally:
        await api.close()


async def test_proxy_from_kubeconfig_environment_and_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:3128")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    api = await new_api_client(kubeconfig=_kubeconfig(tmp_path))
    assert api.rest_client.proxy == "http://127.0.0.1:3128"  # resolved once, at start
    await api.close()
    cfg = _kubeconfig(tmp_path, ', proxy-url: "http://127.0.0.1:8888"')
    api = await new_api_client(kubeconfig=cfg)
    assert api.rest_client.proxy == "http://127.0.0.1:8888"
    await api.close()
    api = await new_api_client(kubeconfig=cfg, proxy="")
    assert api.rest_client.proxy is None
    await api.close()


def test_no_proxy_covers_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:3128")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert environment_proxy("https://127.0.0.1:6443") is None
    assert environment_proxy("https://10.0.0.1:6443") == "http://127.0.0.1:3128"


async def test_tls_connections_keep_a_32_kib_receive_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio's default is 256 KiB per TLS connection, resident: 25 MiB of the controller's
    memory at 1,000 runners went to the API server pool's buffers."""
    from asyncio import sslproto

    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 256 * 1024)
    api = await new_api_client(kubeconfig=_kubeconfig(tmp_path))
    await api.close()
    assert sslproto.SSLProtocol.max_size == 32 * 1024
    protocol = sslproto.SSLProtocol(
        asyncio.get_running_loop(), asyncio.Protocol(), ssl.create_default_context(), None
    )
    assert len(protocol._ssl_buffer) == 32 * 1024
