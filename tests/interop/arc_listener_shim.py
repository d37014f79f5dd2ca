"""Runs ARC's listener binary as the listener pod's container (the kubelet simulator starts
this instead of ``gharc listener``).

The pod's config is the one gharc's controller writes, in ARC's current (snake_case) keys:
``cmd/ghalistener`` reads it as is; ARC's older ``cmd/githubrunnerscalesetlistener`` reads
camelCase keys, so a copy is written for it. ARC's listener reaches Kubernetes only through
``rest.InClusterConfig()``: the service account token and CA file at their fixed path under
``/var/run/secrets`` and ``KUBERNETES_SERVICE_HOST``/``PORT``. They are provided in a
private mount namespace (``unshare -m`` and a tmpfs over ``/run``), so nothing on the
machine changes. The shim then execs into the binary: signals reach ARC's listener itself.

Usage: ``arc_listener_shim.py <kind> <binary>`` with ``KUBECONFIG`` (the pod's service
account) and ``LISTENER_CONFIG_PATH`` set, as the simulator's listener program sets them.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import yaml

SA_DIR = "/run/secrets/kubernetes.io/serviceaccount"

#: gharc's (and ghalistener's) config keys -> cmd/githubrunnerscalesetlistener's.
LEGACY_KEYS = {
    "configure_url": "configureUrl",
    "github_app_id": "appID",
    "github_app_installation_id": "appInstallationID",
    "github_app_private_key": "appPrivateKey",
    "github_token": "token",
    "ephemeral_runner_set_namespace": "ephemeralRunnerSetNamespace",
    "ephemeral_runner_set_name": "ephemeralRunnerSetName",
    "max_runners": "maxRunners",
    "min_runners": "minRunners",
    "runner_scale_set_id": "runnerScaleSetId",
    "runner_scale_set_name": "runnerScaleSetName",
    "server_root_ca": "serverRootCA",
    "log_level": "logLevel",
    "log_format": "logFormat",
}


def main(kind: str, binary: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="arc-listener-"))
    kubeconfig = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    (work / "token").write_text(kubeconfig["users"][0]["user"]["token"])
    (work / "ca.crt").write_bytes(Path(cluster["certificate-authority"]).read_bytes())
    server = urlsplit(cluster["server"])
    env = dict(os.environ)
    env["KUBERNETES_SERVICE_HOST"] = server.hostname or "127.0.0.1"
    env["KUBERNETES_SERVICE_PORT"] = str(server.port or 443)
    config = json.loads(Path(env["LISTENER_CONFIG_PATH"]).read_text())
    if kind == "legacy":
        legacy = {LEGACY_KEYS[k]: v for k, v in config.items() if k in LEGACY_KEYS}
        legacy["appID"] = int(legacy.get("appID") or 0)
        legacy["logLevel"] = "debug"
        path = work / "config.json"
        path.write_text(json.dumps(legacy))
        env["LISTENER_CONFIG_PATH"] = str(path)
    script = (
        "mount -t tmpfs gharc-interop /run"
        f" && mkdir -p {SA_DIR}"
        f" && cp {shlex.quote(str(work))}/token {shlex.quote(str(work))}/ca.crt {SA_DIR}/"
        f" && exec {shlex.quote(binary)}"
    )
    os.execvpe("unshare", ["unshare", "-m", "sh", "-c", script], env)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
