"""Connection settings: a kubeconfig file or the pod's service account.

kubernetes_asyncio does the hard parts (exec plugins, OIDC, client certificates, the
projected token that is re-read before it expires); we only choose which source applies and
size the connection pool. Each HTTP/1.1 watch holds a connection for its whole life, so
the pool must cover ``watches + concurrent requests``; 100 (the library default) leaves
room for a dozen informers and the workers of every controller.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes_asyncio import client, config

__all__ = ["load_configuration", "new_api_client"]

_SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def _has_token() -> bool:
    return _SERVICE_ACCOUNT_TOKEN.exists()


async def load_configuration(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
    pool_size: int = 100,
) -> client.Configuration:
    """Load a Configuration without touching the library's process-wide default.

    ``in_cluster=None`` picks in-cluster config when no kubeconfig is given (neither as an
    argument nor in ``$KUBECONFIG``) and the pod's service account token exists.
    """
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if in_cluster is None:
        in_cluster = not path and "KUBERNETES_SERVICE_HOST" in os.environ and _has_token()
    if in_cluster:
        config.load_incluster_config(client_configuration=cfg)
    else:
        # NB: $KUBECONFIG may list several files; kubernetes_asyncio reads the first one.
        first = path.split(os.pathsep)[0] if path else None
        await config.load_kube_config(
            config_file=first, context=context, client_configuration=cfg, persist_config=False
        )
    cfg.connection_pool_maxsize = pool_size
    return cfg


async def new_api_client(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
    pool_size: int = 100,
) -> client.ApiClient:
    """An ApiClient (one aiohttp session) for the running loop; the caller closes it."""
    cfg = await load_configuration(
        kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, pool_size=pool_size
    )
    return client.ApiClient(cfg)
