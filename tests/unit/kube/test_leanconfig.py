"""The lean connection settings: what they read, what they leave to the full client, and
that a pod listener's process never loads aiohttp (issue 11: one HTTP stack per listener)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from gharc.kube import leanconfig

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: {ca}
    proxy-url: http://proxy.local:3128
users:
- name: u
  user: {user}
contexts:
- name: x
  context: {{cluster: c, user: u}}
- name: other
  context: {{cluster: missing, user: u}}
current-context: x
"""


def write(tmp_path: Path, user: str) -> str:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(ca=ca.decode(), user=user))
    return str(path)


def test_a_token_kubeconfig_is_read_with_its_ca_and_proxy(tmp_path: Path) -> None:
    cfg = leanconfig.load(kubeconfig=write(tmp_path, "{token: abc}"))
    assert cfg is not None
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.ca_data is not None and cfg.ca_data.startswith("-----BEGIN CERTIFICATE-----")
    assert cfg.bearer_token() == "abc"
    assert cfg.proxy == "http://proxy.local:3128"


@pytest.mark.parametrize(
    "user",
    [
        "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}",
        "{auth-provider: {name: oidc}}",
        "{username: admin, password: secret}",
    ],
)
def test_credentials_it_cannot_use_are_left_to_the_full_client(tmp_path: Path, user: str) -> None:
    assert leanconfig.load(kubeconfig=write(tmp_path, user)) is None


def test_a_context_naming_an_unknown_cluster_is_left_to_the_full_client(tmp_path: Path) -> None:
    assert leanconfig.load(kubeconfig=write(tmp_path, "{token: abc}"), context="other") is None


def test_a_token_file_is_read_again_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first\n")
    cfg = leanconfig.load(kubeconfig=write(tmp_path, "{tokenFile: token}"))
    assert cfg is not None
    now = [1000.0]
    monkeypatch.setattr(leanconfig.time, "monotonic", lambda: now[0])
    assert cfg.bearer_token() == "first"
    (tmp_path / "token").write_text("rotated\n")
    now[0] += leanconfig.TOKEN_REREAD_SECONDS - 1
    assert cfg.bearer_token() == "first"
    now[0] += 1
    assert cfg.bearer_token() == "rotated"


def test_in_a_pod_the_service_account_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.setattr(leanconfig, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = leanconfig.load()
    assert cfg is not None
    assert cfg.server == "https://[fd00::1]:443"
    assert cfg.ca_file == str(tmp_path / "ca.crt")
    assert cfg.bearer_token() == "sa-token"


def test_the_pod_listener_process_loads_one_http_stack() -> None:
    probe = (
        "import sys\n"
        "import gharc.listener.__main__, gharc.listener.app\n"
        "from gharc.kube.httpx_transport import HttpxTransport\n"
        "print(','.join(m for m in ('aiohttp', 'kubernetes_asyncio')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


async def test_requests_and_watches_go_direct_proxies_stay_on_httpx() -> None:
    """The pod listener's patches and its watch skip httpx.AsyncClient (about 1 ms of CPU a
    patch); a proxy is httpx's to speak."""
    import asyncio
    import json

    from gharc.kube.httpx_transport import HttpxTransport

    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = next(
                (
                    int(x.split(b":")[1])
                    for x in head.split(b"\r\n")
                    if x.lower().startswith(b"content-length:")
                ),
                0,
            )
            seen.append(head + await reader.readexactly(length))
            if b"watch=true" in head:  # two events, the first split across chunks, then EOF
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for part in (b'{"type":"ADDED",', b'"object":{}}\n{"type":"MODIFIED"}\n'):
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                    await writer.drain()
                    await asyncio.sleep(0.05)
                writer.write(b"0\r\n\r\n")
                break
            body = b'{"kind":"EphemeralRunnerSet"}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = leanconfig.LeanConfig(server=f"http://127.0.0.1:{port}", token="tok")
    transport = HttpxTransport(cfg)
    try:
        resp = await transport.send_request(
            "PATCH",
            "/apis/g/v1/namespaces/n/things/t",
            params=[("fieldManager", "gharc-listener")],
            headers={"Accept": "application/json", "Content-Type": "application/merge-patch+json"},
            body={"spec": {"replicas": 2}},
            timeout=5.0,
        )
        assert resp.status == 200 and json.loads(await resp.read()) == {
            "kind": "EphemeralRunnerSet"
        }
        assert transport._direct is not None and transport._direct.connections_opened == 1
        head, _, body = seen[0].partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert (
            lines[0]
            == b"PATCH /apis/g/v1/namespaces/n/things/t?fieldManager=gharc-listener HTTP/1.1"
        )
        assert b"Authorization: Bearer tok" in lines
        assert b"Content-Type: application/merge-patch+json" in lines
        assert sum(x.lower().startswith(b"content-type:") for x in lines) == 1
        assert json.loads(body) == {"spec": {"replicas": 2}}
        watch = await transport.send_request(
            "GET",
            "/apis/g/v1/things",
            params=[("watch", "true")],
            headers={},
            body=None,
            timeout=None,
            read_timeout=5.0,
        )
        assert watch.status == 200 and transport._direct.connections_opened == 2
        events = [json.loads(line) async for line in watch.lines()]
        assert events == [{"type": "ADDED", "object": {}}, {"type": "MODIFIED"}]
        await watch.aclose()
    finally:
        await transport.close()
        server.close()
    proxied = HttpxTransport(leanconfig.LeanConfig(server=cfg.server, proxy="http://p.local:1"))
    assert proxied._direct is None
    await proxied.close()
