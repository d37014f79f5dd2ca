"""Start and stop a real etcd + kube-apiserver on loopback, the way envtest does.

Controllers are tested against the real API server, never a hand-written fake of it: the
API server's validation, resourceVersion semantics, watch bookmarks and 410s are the
contract. There is no kube-controller-manager, scheduler or kubelet here, so nothing is
garbage collected and pods stay Pending unless a test (or testworld.sim.kubelet) moves them.

Usage::

    async with ControlPlane() as cp:
        print(cp.kubeconfig_path)

Binaries come from ``KUBEBUILDER_ASSETS`` (setup-envtest layout) or ``scripts/testbins``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

import yaml

from testworld.certs import TinyCA
from testworld.sim.processes import child_options

log = logging.getLogger(__name__)

_REPO_ROOT = Path(__file__).resolve().parents[1]
_START_TIMEOUT = float(os.environ.get("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "60").rstrip("s"))


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message carries the process output."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (racy by nature, like envtest's addr.Suggest)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_assets() -> Path:
    """The folder holding ``kube-apiserver`` and ``etcd``, building them if needed."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env and (Path(env) / "kube-apiserver").exists() and (Path(env) / "etcd").exists():
        return Path(env)
    script = _REPO_ROOT / "scripts" / "testbins"
    if not script.exists():
        raise ControlPlaneError(
            "no control plane binaries: set KUBEBUILDER_ASSETS to a folder with "
            "kube-apiserver and etcd, or run scripts/testbins from a gharc checkout"
        )
    out = subprocess.run([str(script)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


class ControlPlane:
    """One etcd and one kube-apiserver in a temporary folder, with an admin kubeconfig.

    ``crds`` are installed (and waited for until established) right after start-up.
    """

    def __init__(
        self,
        *,
        assets_dir: Path | None = None,
        crds: Iterable[dict[str, Any]] = (),
        extra_apiserver_args: Iterable[str] = (),
        serving_ips: Iterable[str] = (),
        service_account_admission: bool = False,
    ) -> None:
        self._assets_dir = assets_dir
        self._crds = list(crds)
        self._extra_args = list(extra_apiserver_args)
        # More addresses in the serving certificate: pods of a real node reach the API
        # server through the node address and the `kubernetes` Service's ClusterIP.
        self._serving_ips = tuple(serving_ips)
        # Off by default: with no kube-controller-manager no namespace gets its `default`
        # ServiceAccount, so the plugin would refuse pods. A real node turns it on.
        self._sa_admission = service_account_admission
        self._tmp: Path | None = None
        self._procs: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        self.assets_dir: Path = Path()
        self.etcd_url = ""
        self.server_url = ""
        self.kubeconfig_path = ""
        self.startup_seconds = 0.0

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> ControlPlane:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        await asyncio.to_thread(self.start_sync)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_sync)

    def start_sync(self) -> None:
        """Start etcd, then kube-apiserver; wait until both are ready."""
        began = time.monotonic()
        self.assets_dir = self._assets_dir or find_assets()
        self._tmp = Path(tempfile.mkdtemp(prefix="gharc-cp-"))
        try:
            self._start_etcd()
            self._start_apiserver()
            if self._crds:
                install_crds_sync(self.kubeconfig_path, self._crds)
        except BaseException:
            self.stop_sync()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info(
            "control plane up in %.2f s: %s (etcd %s)",
            self.startup_seconds,
            self.server_url,
            self.etcd_url,
        )

    def stop_sync(self) -> None:
        """Stop both processes (apiserver first) and remove the temporary folder."""
        for name, proc, out in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop in 20 s; killing it", name)
                    proc.kill()
                    proc.wait()
            out.close()
        self._procs.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    @property
    def pids(self) -> dict[str, int]:
        """The running processes by name (``etcd``, ``kube-apiserver``), for CPU readings."""
        return {name: proc.pid for name, proc, _ in self._procs}

    @property
    def certs_dir(self) -> Path:
        """Where the CAs and the admin and signer keys of this control plane are written."""
        assert self._tmp is not None, "not started"
        return self._tmp / "certs"

    # -- processes ---------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self._tmp is not None
        out = (self._tmp / f"{name}.log").open("wb")
        attach = os.environ.get("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT") == "true"
        proc = subprocess.Popen(
            args,
            stdout=None if attach else out,
            stderr=None if attach else subprocess.STDOUT,
            # Own group, and killed with the thread that spawns it (``start`` runs in the
            # loop's executor, whose threads live until the loop closes): a killed test run
            # leaves no etcd or kube-apiserver behind.
            **child_options(),
        )
        self._procs.append((name, proc, out))
        return proc

    def _output_tail(self, name: str, lines: int = 30) -> str:
        assert self._tmp is not None
        path = self._tmp / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_ready(
        self, name: str, proc: subprocess.Popen[bytes], url: str, ctx: ssl.SSLContext | None
    ) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        last_error = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode}:\n{self._output_tail(name)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        return
            except Exception as err:  # not up yet: connection refused, 500 while starting
                last_error = str(err)
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{name} not ready after {_START_TIMEOUT:.0f} s ({last_error}):\n"
            f"{self._output_tail(name)}"
        )

    def _start_etcd(self) -> None:
        assert self._tmp is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        args = [
            str(self.assets_dir / "etcd"),
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            f"--data-dir={self._tmp / 'etcd'}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]
        proc = self._spawn("etcd", args)
        self._wait_ready("etcd", proc, f"{self.etcd_url}/health", None)

    def _start_apiserver(self) -> None:
        assert self._tmp is not None
        certs = self._tmp / "certs"
        certs.mkdir()
        serving_ca, client_ca, sa_signer = TinyCA(), TinyCA(), TinyCA("service-accounts")
        serving = serving_ca.issue(
            "localhost",
            dns_names=("localhost",),
            ip_addresses=("127.0.0.1", *self._serving_ips),
            server=True,
        )
        admin = client_ca.issue("admin", organizations=("system:masters",), client=True)
        files = {
            "apiserver.crt": serving.cert_pem,
            "apiserver.key": serving.key_pem,
            "serving-ca.crt": serving_ca.cert_pem,
            "client-cert-auth-ca.crt": client_ca.cert_pem,
            "sa-signer.crt": sa_signer.cert_pem,
            "sa-signer.key": sa_signer.key_pem,
            "admin.crt": admin.cert_pem,
            "admin.key": admin.key_pem,
        }
        for fname, data in files.items():
            (certs / fname).write_bytes(data)
        port = free_port()
        self.server_url = f"https://127.0.0.1:{port}"
        args = [
            str(self.assets_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={certs}",
            f"--tls-cert-file={certs / 'apiserver.crt'}",
            f"--tls-private-key-file={certs / 'apiserver.key'}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            *(() if self._sa_admission else ("--disable-admission-plugins=ServiceAccount",)),
            "--authorization-mode=RBAC",
            f"--client-ca-file={certs / 'client-cert-auth-ca.crt'}",
            f"--service-account-issuer={self.server_url}/",
            f"--service-account-key-file={certs / 'sa-signer.crt'}",
            f"--service-account-signing-key-file={certs / 'sa-signer.key'}",
            # How it authenticates to kubelets (logs, exec) when a real node is attached.
            f"--kubelet-client-certificate={certs / 'admin.crt'}",
            f"--kubelet-client-key={certs / 'admin.key'}",
            "--endpoint-reconciler-type=none",
            # Compaction is driven by tests that need it; the default 5 min would make
            # watch-expiry behaviour depend on how long the suite has run.
            "--etcd-compaction-interval=0",
            *self._extra_args,
        ]
        proc = self._spawn("kube-apiserver", args)
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait_ready("kube-apiserver", proc, f"{self.server_url}/readyz", insecure)
        self.kubeconfig_path = str(self._tmp / "admin.kubeconfig")
        Path(self.kubeconfig_path).write_text(
            yaml.safe_dump(
                kubeconfig_dict(
                    self.server_url,
                    ca_pem=serving_ca.cert_pem,
                    cert_pem=admin.cert_pem,
                    key_pem=admin.key_pem,
                )
            )
        )
        os.chmod(self.kubeconfig_path, 0o600)
        self._wait_default_namespace()

    def _wait_default_namespace(self) -> None:
        """The API server creates ``default`` shortly after it reports ready."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._admin_get("/api/v1/namespaces/default") == 200:
                return
            time.sleep(0.1)
        raise ControlPlaneError("namespace 'default' did not appear within 15 s")

    def _admin_get(self, path: str) -> int:
        assert self._tmp is not None
        certs = self._tmp / "certs"
        ctx = ssl.create_default_context(cafile=str(certs / "serving-ca.crt"))
        ctx.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
        try:
            with urllib.request.urlopen(self.server_url + path, timeout=2, context=ctx) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except OSError:
            return 0

    # -- test helpers -----------------------------------------------------------------
    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, expiring every older watch (410 Gone)."""
        import json

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            req = urllib.request.Request(
                self.etcd_url + path,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=5) as resp:
                return dict(json.loads(resp.read()))

        # A write outside /registry bumps the revision, so compacting twice in a row works.
        import base64

        key = base64.b64encode(b"/gharc-test/compaction-marker").decode()
        put = post("/v3/kv/put", {"key": key, "value": base64.b64encode(b"x").decode()})
        revision = int(put["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision


def kubeconfig_dict(
    server: str, *, ca_pem: bytes, cert_pem: bytes, key_pem: bytes
) -> dict[str, Any]:
    """An admin kubeconfig with everything inline, named like envtest's."""
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gharc-test",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)},
            }
        ],
        "contexts": [{"name": "gharc-test", "context": {"cluster": "gharc-test", "user": "admin"}}],
        "current-context": "gharc-test",
    }


def install_crds_sync(kubeconfig_path: str, crds: Iterable[dict[str, Any]]) -> None:
    """Create (or replace) CRDs and wait until every one is Established."""
    asyncio.run(install_crds(kubeconfig_path, crds))


async def install_crds(kubeconfig_path: str, crds: Iterable[dict[str, Any]]) -> None:
    """Create (or replace) CRDs and wait until every one is Established."""
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.client.exceptions import ApiException

    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig_path, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        ext = client.ApiextensionsV1Api(api)
        names = []
        for crd in crds:
            name = crd["metadata"]["name"]
            names.append(name)
            try:
                await ext.create_custom_resource_definition(cast(Any, crd))
            except ApiException as err:
                if err.status != 409:
                    raise
                current = await ext.read_custom_resource_definition(name)
                crd = {**crd, "metadata": {**crd["metadata"]}}
                crd["metadata"]["resourceVersion"] = current.metadata.resource_version
                await ext.replace_custom_resource_definition(name, cast(Any, crd))
        deadline = time.monotonic() + 30
        for name in names:
            while True:
                got = await ext.read_custom_resource_definition(name)
                conds = got.status.conditions or [] if got.status else []
                if any(c.type == "Established" and c.status == "True" for c in conds):
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not Established within 30 s")
                await asyncio.sleep(0.05)


@contextlib.contextmanager
def running_control_plane(**kwargs: Any) -> Any:
    """A synchronous context manager, for pytest session fixtures and scripts."""
    cp = ControlPlane(**kwargs)
    cp.start_sync()
    try:
        yield cp
    finally:
        cp.stop_sync()
