"""Build the images a real test node runs, with no container registry at all.

Three images go into the node's containerd:

- ``gharc`` itself, built from the project's ``Dockerfile`` (the file users build). Its
  ``PYTHON_IMAGE`` base is not pulled: a Debian rootfs made by ``debootstrap`` from the
  host's own apt mirror (python3, venv, CA certificates) is imported as that base;
- the simulated runner: the same Dockerfile's ``sim`` stage (the product image leaves the
  simulators out) with ``python -m testworld.realnode_runner`` as its entrypoint, so
  runner pods are real containers running the simulator's runner;
- the pod sandbox ("pause") image: a 20-line static C program, since containerd would
  otherwise pull one.

A private ``dockerd`` (classic builder, own data root under the cache, no bridge, no
iptables) builds them and is stopped afterwards; ``docker save`` writes one archive that
``ctr images import`` loads. The rootfs and docker's layer cache live under
``~/.cache/gharc/realnode`` so a rebuild with unchanged sources takes seconds.

Run ``python -m testworld.realnode_image`` to build and print the archive path.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testworld.sim.processes import child_options

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("GHARC_CACHE", Path.home() / ".cache" / "gharc")) / "realnode"

SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
BASE_IMAGE = "localhost/gharc/debian-python:" + SUITE
GHARC_IMAGE = "localhost/gharc/gharc:dev"
SIM_IMAGE = "localhost/gharc/gharc-sim:dev"
RUNNER_IMAGE = "localhost/testworld/sim-runner:dev"
PAUSE_IMAGE = "localhost/gharc/pause:1"

PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction q = {0}, r = {0};
  q.sa_handler = quit; r.sa_handler = reap; r.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGINT, &q, NULL); sigaction(SIGTERM, &q, NULL); sigaction(SIGCHLD, &r, NULL);
  for (;;) pause();
}
"""


class ImageBuildError(RuntimeError):
    """An image could not be built; the message says which step and why."""


def _run(args: list[str], *, log_to: Path | None = None, **kw: object) -> None:
    """Run a build step, keeping its output in ``log_to`` and quoting its tail on failure."""
    out = (log_to or Path(os.devnull)).open("ab")
    try:
        proc = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, check=False, **kw)  # type: ignore[call-overload]
    finally:
        out.close()
    if proc.returncode != 0:
        tail = log_to.read_text(errors="replace")[-3000:] if log_to else ""
        raise ImageBuildError(f"{' '.join(args[:3])} ... failed ({proc.returncode}):\n{tail}")


def host_apt_mirror() -> str | None:
    """The Debian mirror the host's apt uses, so debootstrap asks the same place apt does."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    listing = Path("/etc/apt/sources.list")
    if listing.exists():
        for line in listing.read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1]
    return None


def ensure_tools(*names: str) -> None:
    """Install Debian's packages for the given commands when missing (root, apt-get)."""
    packages = {
        "debootstrap": "debootstrap",
        "dockerd": "docker.io",
        "containerd": "containerd",
        "runc": "runc",
        "cc": "gcc",
        "iptables": "iptables",
    }
    missing = [packages[n] for n in names if shutil.which(n) is None]
    if not missing:
        return
    log.warning("installing Debian packages: %s", " ".join(missing))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        check=True,
        env=env,
    )


def base_rootfs() -> Path:
    """A tarball of a minimal Debian with python3; made once by debootstrap, then cached.

    The host's CA bundle and pip's ``cert`` setting go in too: PyPI is reached through the
    host's network, whose TLS roots are the host's.
    """
    key = hashlib.sha256(" ".join((SUITE, *BASE_PACKAGES)).encode()).hexdigest()[:12]
    tarball = CACHE / f"rootfs-{SUITE}-{key}.tar"
    if tarball.exists():
        return tarball
    ensure_tools("debootstrap")
    CACHE.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gharc-rootfs-", dir=CACHE) as tmp:
        root = Path(tmp) / "root"
        args = ["debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES)]
        args += [SUITE, str(root)]
        mirror = host_apt_mirror()
        if mirror:
            args.append(mirror)
        log.warning("debootstrap %s (a few minutes the first time)", SUITE)
        _run(args, log_to=CACHE / "debootstrap.log")
        host_ca = Path("/etc/ssl/certs/ca-certificates.crt")
        if host_ca.exists():
            shutil.copyfile(host_ca, root / "etc/ssl/certs/ca-certificates.crt")
        (root / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        _run(["tar", "-C", str(root), "-cf", str(tarball) + ".tmp", "."])
        os.replace(str(tarball) + ".tmp", tarball)
    log.warning("rootfs built in %.0f s: %s", time.monotonic() - began, tarball)
    return tarball


def pause_binary(folder: Path) -> Path:
    """The static pause program of the pod sandbox image."""
    ensure_tools("cc")
    src, out = folder / "pause.c", folder / "pause"
    src.write_text(PAUSE_C)
    _run(["cc", "-static", "-Os", "-s", "-o", str(out), str(src)], log_to=folder / "cc.log")
    return out


@contextmanager
def private_dockerd() -> Iterator[dict[str, str]]:
    """A dockerd of our own for building: yields the environment that points docker at it.

    Own socket, exec root and data root (cached, so layers survive between runs), no bridge
    network and no iptables rules: builds use the host network, nothing else runs.
    """
    ensure_tools("dockerd")
    data = CACHE / "docker"
    data.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="gharc-dockerd-", dir="/run"))
    sock = run / "docker.sock"
    logf = (CACHE / "dockerd.log").open("ab")
    proc = subprocess.Popen(
        [
            "dockerd",
            f"--host=unix://{sock}",
            f"--data-root={data}",
            f"--exec-root={run / 'exec'}",
            f"--pidfile={run / 'docker.pid'}",
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
            "--storage-driver=overlay2",
        ],
        stdout=logf,
        stderr=subprocess.STDOUT,
        **child_options(),
    )
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}", "DOCKER_BUILDKIT": "0"}
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["docker", "version"], env=env, capture_output=True).returncode:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (CACHE / "dockerd.log").read_text(errors="replace")[-2000:]
                raise ImageBuildError(f"dockerd did not start:\n{tail}")
            time.sleep(0.3)
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()
        shutil.rmtree(run, ignore_errors=True)


def build_images(archive: Path | None = None) -> Path:
    """Build the three images and ``docker save`` them into one archive; returns its path."""
    archive = archive or CACHE / "images.tar"
    rootfs = base_rootfs()
    blog = CACHE / "build.log"
    blog.write_text("")
    began = time.monotonic()
    with private_dockerd() as env, tempfile.TemporaryDirectory(prefix="gharc-img-") as tmp:
        folder = Path(tmp)
        have = subprocess.run(
            ["docker", "image", "inspect", BASE_IMAGE], env=env, capture_output=True
        )
        if have.returncode != 0:
            _run(["docker", "import", str(rootfs), BASE_IMAGE], env=env, log_to=blog)
        _run(
            [
                *("docker", "build", "--network=host"),
                *(f"--build-arg=PYTHON_IMAGE={BASE_IMAGE}", "-t", GHARC_IMAGE, str(REPO_ROOT)),
            ],
            env=env,
            log_to=blog,
        )
        _run(  # the same Dockerfile's `sim` stage: the product plus the simulators
            [
                *("docker", "build", "--network=host", "--target=sim"),
                *(f"--build-arg=PYTHON_IMAGE={BASE_IMAGE}", "-t", SIM_IMAGE, str(REPO_ROOT)),
            ],
            env=env,
            log_to=blog,
        )
        runner_dir = folder / "runner"
        runner_dir.mkdir()
        (runner_dir / "Dockerfile").write_text(
            f'FROM {SIM_IMAGE}\nENTRYPOINT ["python", "-m", "testworld.realnode_runner"]\nCMD []\n'
        )
        _run(["docker", "build", "-t", RUNNER_IMAGE, str(runner_dir)], env=env, log_to=blog)
        pause_dir = folder / "pause"
        pause_dir.mkdir()
        pause_binary(pause_dir)
        (pause_dir / "Dockerfile").write_text(
            'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'
        )
        _run(["docker", "build", "-t", PAUSE_IMAGE, str(pause_dir)], env=env, log_to=blog)
        tmp_archive = archive.with_suffix(".tmp")
        _run(
            ["docker", "save", "-o", str(tmp_archive), GHARC_IMAGE, RUNNER_IMAGE, PAUSE_IMAGE],
            env=env,
            log_to=blog,
        )
        os.replace(tmp_archive, archive)
    log.warning("images built in %.0f s: %s", time.monotonic() - began, archive)
    return archive


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    print(build_images())


if __name__ == "__main__":
    main()
