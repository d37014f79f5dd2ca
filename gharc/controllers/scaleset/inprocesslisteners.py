"""Glue between the AutoscalingListener reconciler and the in-process :class:`ListenerHost`.

The reconciler builds a listener's ``config.json`` exactly as for a listener pod (so both
modes run on one definition of the configuration); this module turns it into what a hosted
listener needs: a validated :class:`ListenerConfig`, an Actions client and its metrics, and a
fingerprint that tells when a running listener must be restarted with new settings.

Listener clients come from their own :class:`ClientPool`, not the reconcilers': every
listener holds a long poll open all the time, so its connection pool must not be capped
(httpx's default is 100 connections) nor shared with the controller's JIT config calls.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from gharc.api.scaleset.views import AutoscalingListenerView
from gharc.controllers.scaleset.credentials import ClientResolver, GitHubTarget
from gharc.github.auth import credentials_from_secret_data
from gharc.github.breaker import BreakerRegistry
from gharc.github.config import parse_config_url
from gharc.github.pool import ClientPool
from gharc.github.transport import WriteGate
from gharc.kube.serving import serving_address
from gharc.listener.config import ConfigError, ListenerConfig
from gharc.listener.host import Resolve
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.session import ActionsAPI

__all__ = ["fingerprint", "hosted_metrics", "listener_pool", "resolver_for"]

JSON = dict[str, Any]
_CREDENTIAL_KEYS = (
    "github_token",
    "github_app_id",
    "github_app_installation_id",
    "github_app_private_key",
)


def listener_pool(
    *,
    user_agent: str,
    transport: httpx.AsyncBaseTransport | None,
    write_gate: WriteGate | None = None,
) -> ClientPool:
    """The pool in-process listeners take their Actions clients from (no connection cap).

    Its clients pass the process's breakers and rate budgets, the reconcilers' own, so a
    listener's job acquisition and a reconciler's JIT config draw on one budget per
    credential, in priority order; a listener waits out a limit where a reconciler requeues.
    ``write_gate`` is the controller's fences: a listener of a replica that lost its Lease
    acquires no job and deletes no message or session.
    """
    return ClientPool(
        user_agent=user_agent,
        transport=transport,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        breakers=BreakerRegistry.process(),
        write_gate=write_gate,
    )


def fingerprint(config: Mapping[str, Any]) -> str:
    """A digest of everything a listener runs with (credentials included, never logged)."""
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True).encode()).hexdigest()


def hosted_config(config: Mapping[str, Any]) -> ListenerConfig:
    """The listener's config without a metrics server (the controller serves the metrics)."""
    data = {k: v for k, v in config.items() if v is not None}
    data["metrics_addr"] = ""
    try:
        cfg = ListenerConfig.model_validate(data)
    except ValueError as err:
        raise ConfigError(f"invalid listener configuration: {err}") from None
    cfg.validate_semantics()
    return cfg


def hosted_metrics(config: Mapping[str, Any]) -> ListenerMetrics:
    """The metrics of the listener ``config`` (its ``config.json``) describes.

    The controller serves them, so ``metrics_addr`` is not where they are served but
    whether: ``listener_config`` writes it only when ``--listener-metrics-addr`` is on. Off,
    the listener records none of ARC's metrics (before, a hosted listener recorded them
    anyway, and 20,000 buckets cost 11.6 MiB per distinct job name nobody could scrape).
    """
    cfg = hosted_config(config)
    enabled = serving_address(str(config.get("metrics_addr") or "")) is not None
    return ListenerMetrics.for_listener(cfg, parse_config_url(cfg.configure_url), enabled=enabled)


def resolver_for(
    listener: JSON,
    config: JSON,
    resolver: ClientResolver,
    rebuild: Callable[[JSON], Awaitable[JSON]],
    pool: ClientPool,
) -> Resolve:
    """The hosted listener's ``resolve``: reads the credentials again after a failure.

    A listener whose credentials were rejected backs off and then starts from a fresh read
    of the GitHub Secret, so a restored or rotated token is used without anyone restarting
    anything (no-job-stranded: a credential outage costs the outage, not a full stop).
    """
    view = AutoscalingListenerView(listener)
    target = GitHubTarget.from_spec(view.ars_namespace, view.spec)

    async def resolve(fresh: bool) -> tuple[ListenerConfig, ActionsAPI, ListenerMetrics]:
        current = config
        if fresh:
            resolver.forget_credentials(target)
            current = await rebuild(listener)
        cfg = hosted_config(current)
        if target.vault is not None:
            # config.json names the vault; the controller reads it with its own identity.
            data = await resolver.github_config_data(target)
        else:
            data = {k: str(current[k]) for k in _CREDENTIAL_KEYS if current.get(k)}
        credentials = credentials_from_secret_data(data)
        # The scale set's spec.proxy, as a listener pod gets it through its proxy Secret.
        proxy = await resolver.proxy_for(target)
        api = pool.get(
            cfg.configure_url, credentials, ca_bundle=cfg.server_root_ca or None, proxy=proxy
        )
        return cfg, api, hosted_metrics(current)

    return resolve
