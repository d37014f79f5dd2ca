"""Connection settings: a kubeconfig file or the pod's service account.

kubernetes_asyncio does the hard parts (exec plugins, OIDC, client certificates, the
projected token that is re-read before it expires); we only choose which source applies and
size the connection pool. Each HTTP/1.1 watch holds a connection for its whole life, so
the pool must cover ``watches + concurrent requests``; 100 (the library default) leaves
room for a dozen informers and the workers of every controller.

The library's aiohttp session is built with ``trust_env=True``: aiohttp then looks up the
proxy environment and ``~/.netrc`` on *every* request, through a thread-pool hop, which
was 39 % of the controller's CPU. We replace it with a ``trust_env=False`` session on the
same connector and resolve the proxy once, at start: an explicit ``proxy`` argument, else
the kubeconfig's ``proxy-url``, else ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY``
covers the API server (what client-go does, read once instead of per request).
"""

from __future__ import annotations

import os
from asyncio import sslproto
from pathlib import Path

import aiohttp

from gharc.kube import leanimport
from gharc.kube.leanconfig import environment_proxy

leanimport.install()  # before the first kubernetes_asyncio import: see its docstring

import kubernetes_asyncio.config as config  # noqa: E402
from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402

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
) -> Configuration:
    """Load a Configuration without touching the library's process-wide default.

    ``in_cluster=None`` picks in-cluster config when no kubeconfig is given (neither as an
    argument nor in ``$KUBECONFIG``) and the pod's service account token exists.
    """
    cfg = Configuration()
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
    proxy: str | None = None,
) -> ApiClient:
    """An ApiClient (one aiohttp session) for the running loop; the caller closes it.

    ``proxy`` overrides the kubeconfig's ``proxy-url`` and the environment (``""``: no
    proxy at all)."""
    cfg = await load_configuration(
        kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, pool_size=pool_size
    )
    if proxy is not None:
        cfg.proxy = proxy or None
    elif not cfg.proxy:
        cfg.proxy = environment_proxy(str(cfg.host))
    bound_tls_receive_buffers()
    api = ApiClient(cfg)
    _without_trust_env(api)
    return api


TLS_RECEIVE_BUFFER = 32 * 1024
"""Bytes asyncio keeps per TLS connection for reading: two full 16 KiB TLS records."""


def bound_tls_receive_buffers() -> None:
    """Give every asyncio TLS connection a 32 KiB receive buffer instead of 256 KiB.

    asyncio allocates (and zero-fills, so it is resident) ``SSLProtocol.max_size`` bytes per
    TLS connection, and under load the controller's pool to the API server holds all
    ``pool_size`` (100) connections: 25 MiB of buffers. A smaller buffer only means more,
    smaller reads of a large list. The class attribute is asyncio's only setting for it.
    """
    if sslproto.SSLProtocol.max_size > TLS_RECEIVE_BUFFER:
        sslproto.SSLProtocol.max_size = TLS_RECEIVE_BUFFER


def _without_trust_env(api: ApiClient) -> None:
    """Swap the library's ``trust_env=True`` session for one that does no per-request
    environment lookups, on the same connector (TLS settings and pool size kept)."""
    rest = api.rest_client
    old: aiohttp.ClientSession = rest.pool_manager
    connector = old.connector
    old.detach()  # the connector now belongs to the new session alone
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )
