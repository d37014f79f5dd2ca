"""A real single-node cluster for the tests: containerd, kubelet, scheduler, controllers.

:class:`ControlPlane` alone has no node: pods never run, nothing is garbage collected and
no StatefulSet controller exists. :class:`RealCluster` adds, next to its etcd and
kube-apiserver, what a real cluster has, all built from the Go module proxy by
``scripts/testbins node`` or installed from Debian's packages:

- Debian's ``containerd`` + ``runc`` + CNI plugins (a bridge network, no masquerading and
  no forwarding: pods reach the node's addresses and each other, never the outside);
- ``kubelet`` (cgroup v1 with the cgroupfs driver, as this kernel has no cgroup v2),
  ``kube-scheduler``, ``kube-controller-manager`` (garbage collection, ReplicaSets,
  StatefulSets, ServiceAccounts, the root CA ConfigMap) and ``kube-proxy`` (iptables mode,
  so in-cluster clients reach the API server through the ``kubernetes`` Service).

Every port is a free port and every folder a temporary one. The node's address is an
extra address on ``lo`` (the kubelet refuses a loopback node IP): pods reach the host
through it, so services of the test world (the fake GitHub) listen there. One real node
runs on a machine at a time (a lock file); teardown stops every container, unmounts what
the node mounted, and removes the address, the bridge and kube-proxy's rules.

Usage::

    with RealCluster() as rc:
        rc.load_images(archive)      # docker-save archive (testworld.realnode_image)
        print(rc.kubeconfig_path)

``unavailable_reason()`` says why this host cannot run one (not root, no cgroups, no
overlayfs), so tests can skip saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

from testworld.controlplane import ControlPlane, free_port
from testworld.realnode_image import PAUSE_IMAGE, ensure_tools
from testworld.sim.processes import child_options

log = logging.getLogger(__name__)

NODE_NAME = "gharc-node"
NODE_IP = os.environ.get("GHARC_REALNODE_NODE_IP", "10.89.0.1")
POD_CIDR = os.environ.get("GHARC_REALNODE_POD_CIDR", "10.88.0.0/16")
SERVICE_CIDR = "10.0.0.0/24"  # the ControlPlane's --service-cluster-ip-range
KUBERNETES_SERVICE_IP = "10.0.0.1"
BRIDGE = "gharc0"
CNI_BIN = Path("/usr/lib/cni")
LOCK_FILE = Path("/run/lock/gharc-realnode.lock")
NAMESPACE_K8S = "k8s.io"


class RealNodeError(RuntimeError):
    """The node could not be brought up; the message carries the failing component's log."""


def unavailable_reason() -> str | None:
    """Why this host cannot run a real node, or None when it can (checked cheaply)."""
    if os.name != "posix" or not Path("/proc/self/mountinfo").exists():
        return "not Linux"
    if os.geteuid() != 0:
        return "containerd and the kubelet need root"
    if (
        not Path("/sys/fs/cgroup/memory").is_dir()
        and not Path("/sys/fs/cgroup/cgroup.controllers").exists()
    ):
        return "no memory cgroup mounted under /sys/fs/cgroup"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containerd's overlayfs snapshotter)"
    if shutil.which("apt-get") is None and shutil.which("containerd") is None:
        return "containerd is not installed and there is no apt-get to install it"
    return None


def _sh(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def remove_kube_chains() -> None:
    """Delete the KUBE-* chains (and the jumps to them) the kubelet and kube-proxy made.

    The kubelet adds KUBE-FIREWALL and canary chains in both the nft and legacy iptables
    backends and never removes them; ``kube-proxy --cleanup`` only removes its own.
    """
    for tool in ("iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle"):
            rules = _sh(tool, "-w", "-t", table, "-S").stdout.splitlines()
            chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
            for rule in rules:
                parts = shlex.split(rule)
                if (
                    parts[:1] == ["-A"]
                    and not parts[1].startswith("KUBE-")
                    and any(p.startswith("KUBE-") for p in parts[2:])
                ):
                    _sh(tool, "-w", "-t", table, "-D", *parts[1:])
            for chain in chains:
                _sh(tool, "-w", "-t", table, "-F", chain)
            for chain in chains:
                _sh(tool, "-w", "-t", table, "-X", chain)


class RealCluster:
    """A :class:`ControlPlane` plus one real node; see the module docstring."""

    def __init__(
        self, *, crds: list[dict[str, Any]] | None = None, images: Path | None = None
    ) -> None:
        self._images = images
        self.cp = ControlPlane(
            crds=crds or [],
            serving_ips=(NODE_IP, KUBERNETES_SERVICE_IP),
            service_account_admission=True,
            extra_apiserver_args=(
                "--bind-address=0.0.0.0",
                f"--advertise-address={NODE_IP}",
                "--endpoint-reconciler-type=lease",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
            ),
        )
        self._tmp: Path | None = None
        self._lock: IO[str] | None = None
        self._procs: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        self._added_address = False
        self.containerd_sock = ""
        self.startup_seconds = 0.0
        self.image_load_seconds = 0.0
        self.node_ip = NODE_IP

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def kubeconfig_path(self) -> str:
        return self.cp.kubeconfig_path

    @property
    def assets_dir(self) -> Path:
        return self.cp.assets_dir

    def start(self) -> None:
        """Bring everything up; ``images`` (a docker-save archive) must hold the pause image."""
        reason = unavailable_reason()
        if reason:
            raise RealNodeError(f"this host cannot run a real node: {reason}")
        ensure_tools("containerd", "runc", "iptables")
        if not (CNI_BIN / "bridge").exists():
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "containernetworking-plugins"], check=True
            )
        began = time.monotonic()
        self._take_lock()
        try:
            self._tmp = Path(tempfile.mkdtemp(prefix="gharc-node-"))
            self._add_node_address()
            self.cp.start_sync()
            self._check_binaries()
            self._start_containerd()
            if self._images is not None:
                self.image_load_seconds = self.load_images(self._images)
            self._start_kubelet()
            self._start_component("kube-scheduler", self._scheduler_args())
            self._start_component("kube-controller-manager", self._kcm_args())
            self._start_component("kube-proxy", self._proxy_args())
            self._wait_node_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.warning(
            "real node up in %.1f s (%s, node %s)",
            self.startup_seconds,
            self.cp.server_url,
            NODE_IP,
        )

    def stop(self) -> None:
        """Stop the node's processes and containers and undo every change to the host."""
        for name in ("kube-proxy", "kube-scheduler", "kube-controller-manager", "kubelet"):
            self._stop_process(name)
        if self.containerd_sock:
            self._remove_all_containers()
        self._stop_process("containerd")
        self._kill_orphan_shims()
        self._cleanup_network()
        self._unmount_under_tmp()
        self.cp.stop_sync()
        for _, _, out in self._procs:
            out.close()
        self._procs.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        self._remove_node_address()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # -- host set-up ---------------------------------------------------------------------
    def _take_lock(self, timeout: float = 900.0) -> None:
        """One real node per machine: the bridge, the node address and iptables are shared."""
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        self._lock = LOCK_FILE.open("w")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RealNodeError(f"another real node holds {LOCK_FILE}") from None
                time.sleep(1)

    def _add_node_address(self) -> None:
        out = _sh("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo")
        self._added_address = out.returncode == 0
        if out.returncode != 0 and "File exists" not in out.stderr:
            raise RealNodeError(f"cannot add {NODE_IP} to lo: {out.stderr.strip()}")

    def _remove_node_address(self) -> None:
        if self._added_address:
            _sh("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo")
            self._added_address = False

    def _check_binaries(self) -> None:
        for name in ("kubelet", "kube-scheduler", "kube-controller-manager", "kube-proxy"):
            if not (self.assets_dir / name).exists():
                raise RealNodeError(
                    f"{self.assets_dir} has no {name}: run `scripts/testbins node` (about 5 "
                    "minutes more after kube-apiserver; cached afterwards)"
                )

    # -- processes ---------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self._tmp is not None
        out = (self._tmp / f"{name}.log").open("wb")
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, **child_options())
        self._procs.append((name, proc, out))
        return proc

    def log_tail(self, name: str, lines: int = 40) -> str:
        """The last lines of a component's output (for failure messages)."""
        if self._tmp is None or not (self._tmp / f"{name}.log").exists():
            return ""
        text = (self._tmp / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _stop_process(self, name: str) -> None:
        for pname, proc, _ in self._procs:
            if pname != name or proc.poll() is not None:
                continue
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.info("%s stopped in %.1f s", name, time.monotonic() - began)

    def _wait(self, what: str, check: Any, name: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        proc = next(p for n, p, _ in self._procs if n == name)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RealNodeError(f"{name} exited ({proc.returncode}):\n{self.log_tail(name)}")
            if check():
                return
            time.sleep(0.2)
        raise RealNodeError(f"{what} not within {timeout:.0f} s:\n{self.log_tail(name)}")

    def _start_component(self, name: str, args: list[str]) -> None:
        self._spawn(name, [str(self.assets_dir / name), *args])

    # -- containerd --------------------------------------------------------------------
    def _start_containerd(self) -> None:
        assert self._tmp is not None
        base = self._tmp / "containerd"
        cni_conf = self._tmp / "cni"
        cni_conf.mkdir()
        (cni_conf / "10-gharc.conflist").write_text(json.dumps(self._cni_config()))
        self.containerd_sock = str(base / "containerd.sock")
        cri = "io.containerd.grpc.v1.cri"
        config = f"""
version = 2
root = "{base / "root"}"
state = "{base / "state"}"
[grpc]
  address = "{self.containerd_sock}"
[plugins."{cri}"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."{cri}".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."{cri}".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."{cri}".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."{cri}".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni_conf}"
"""
        base.mkdir()
        (base / "config.toml").write_text(config)
        self._spawn("containerd", ["containerd", "--config", str(base / "config.toml")])
        self._wait(
            "containerd ready",
            lambda: self._ctr("version").returncode == 0,
            "containerd",
        )

    def _cni_config(self) -> dict[str, Any]:
        assert self._tmp is not None
        return {
            "cniVersion": "1.0.0",
            "name": "gharc",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self._tmp / "cni-ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _sh("ctr", "--address", self.containerd_sock, "-n", NAMESPACE_K8S, *args)

    def load_images(self, archive: Path) -> float:
        """Import a docker-save archive into the node's containerd; returns the seconds taken."""
        began = time.monotonic()
        out = self._ctr("images", "import", "--all-platforms", str(archive))
        if out.returncode != 0:
            raise RealNodeError(f"ctr images import failed: {out.stderr.strip()}")
        return time.monotonic() - began

    def _remove_all_containers(self) -> None:
        """What a kubelet left running (it was stopped first): kill tasks, drop containers."""
        for cid in self._ctr("containers", "list", "-q").stdout.split():
            self._ctr("tasks", "kill", "-s", "SIGKILL", cid)
        deadline = time.monotonic() + 10
        while self._ctr("tasks", "list", "-q").stdout.split() and time.monotonic() < deadline:
            time.sleep(0.2)
        for cid in self._ctr("containers", "list", "-q").stdout.split():
            self._ctr("tasks", "delete", "-f", cid)
            self._ctr("containers", "delete", cid)

    def _kill_orphan_shims(self) -> None:
        """containerd's shims outlive it by design; those of our socket are ours to end."""
        if not self.containerd_sock:
            return
        for pid_dir in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                cmd = (pid_dir / "cmdline").read_bytes().split(b"\0")
                if b"containerd-shim" in cmd[0] and self.containerd_sock.encode() in cmd:
                    os.kill(int(pid_dir.name), signal.SIGKILL)

    def _cleanup_network(self) -> None:
        """Pod network namespaces, the bridge and kube-proxy's iptables chains."""
        if self._tmp is None:
            return
        for ns in Path("/run/netns").glob("cni-*"):
            # containerd names them cni-<uuid>; only those still mounted from our pods remain.
            if not _sh("ip", "netns", "pids", ns.name).stdout.strip():
                _sh("ip", "netns", "delete", ns.name)
        _sh("ip", "link", "delete", BRIDGE)
        proxy = self.assets_dir / "kube-proxy"
        if proxy.exists() and any(n == "kube-proxy" for n, _, _ in self._procs):
            _sh(str(proxy), "--cleanup")
        if any(n == "kubelet" for n, _, _ in self._procs):
            remove_kube_chains()

    def _unmount_under_tmp(self) -> None:
        if self._tmp is None:
            return
        prefix = str(self._tmp)
        mounts = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(prefix)
        ]
        for mnt in sorted(mounts, key=len, reverse=True):
            _sh("umount", "-l", mnt)

    # -- kubelet -------------------------------------------------------------------------
    def _start_kubelet(self) -> None:
        assert self._tmp is not None
        root = self._tmp / "kubelet"
        root.mkdir()
        certs = self.cp.certs_dir
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(certs / "client-cert-auth-ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "podLogsDir": str(self._tmp / "pod-logs"),
            "resolvConf": "",
            "clusterDomain": "cluster.local",
            # A shared test machine's disk is not this node's to police: no evictions and
            # no image garbage collection (the images were loaded, not pulled).
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "0%",
                "imagefs.available": "0%",
                "nodefs.inodesFree": "0%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
        }
        path = self._tmp / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                str(self.assets_dir / "kubelet"),
                f"--config={path}",
                f"--kubeconfig={self.kubeconfig_path}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--node-ip={NODE_IP}",
                f"--hostname-override={NODE_NAME}",
                "--v=1",
            ],
        )

    def _scheduler_args(self) -> list[str]:
        """The flags the scheduler and the controller manager share: the admin kubeconfig
        for the API, authentication and authorization, a loopback port, no leader election
        (one instance of each)."""
        kc = self.kubeconfig_path
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
        ]

    def _kcm_args(self) -> list[str]:
        certs = self.cp.certs_dir
        return [
            *self._scheduler_args(),
            f"--root-ca-file={certs / 'serving-ca.crt'}",
            f"--service-account-private-key-file={certs / 'sa-signer.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=false",
            # Faster than production so tests see GC and pod replacement promptly.
            "--concurrent-gc-syncs=10",
        ]

    def _proxy_args(self) -> list[str]:
        assert self._tmp is not None
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": self.kubeconfig_path},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "clusterCIDR": POD_CIDR,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{NODE_IP}/32"],
            # Leave the host's conntrack and localnet sysctls as they are.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"localhostNodePorts": False},
        }
        path = self._tmp / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        return [f"--config={path}"]

    def get(self, path: str) -> dict[str, Any] | None:
        """GET an API path as the admin; None when it is not there (yet)."""
        text = self.get_text(path)
        return dict(json.loads(text)) if text is not None else None

    def get_text(self, path: str) -> str | None:
        """GET an API path as the admin (e.g. a pod's ``/log``); None on any error."""
        import ssl
        import urllib.error
        import urllib.request

        certs = self.cp.certs_dir
        ctx = ssl.create_default_context(cafile=str(certs / "serving-ca.crt"))
        ctx.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
        try:
            with urllib.request.urlopen(self.cp.server_url + path, timeout=5, context=ctx) as r:
                return str(r.read().decode(errors="replace"))
        except (urllib.error.URLError, OSError):
            return None

    def _wait_node_ready(self, timeout: float = 90.0) -> None:
        def ready() -> bool:
            node = self.get(f"/api/v1/nodes/{NODE_NAME}") or {}
            conds = node.get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        self._wait("node Ready", ready, "kubelet", timeout)


def main() -> None:
    """``--check``: say whether this host can run a real node (exit 1 with the reason if
    not). Otherwise bring one up with the images loaded, print how to reach it and keep it
    until Ctrl-C."""
    import argparse

    from testworld.realnode_image import build_images

    parser = argparse.ArgumentParser(prog="python -m testworld.realnode")
    parser.add_argument("--check", action="store_true", help="only check the host")
    parser.add_argument("--no-images", action="store_true", help="load no images")
    args = parser.parse_args()
    if args.check:
        reason = unavailable_reason()
        print(reason or "ok")
        raise SystemExit(1 if reason else 0)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    archive = None if args.no_images else build_images()
    with RealCluster(images=archive) as rc:
        print(f"export KUBECONFIG={rc.kubeconfig_path}")
        print(f"node {NODE_NAME} Ready in {rc.startup_seconds:.1f} s; Ctrl-C tears it down")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
