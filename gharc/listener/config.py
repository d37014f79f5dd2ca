"""The listener's configuration: ARC's ``config.json`` (snake_case keys), plus env overrides.

The AutoscalingListener controller writes ``config.json`` into the listener's secret and
mounts it at ``LISTENER_CONFIG_PATH``; the keys are ARC's own (``cmd/ghalistener/config``) so
an ARC-written secret works unchanged. Validation happens once, before any network call, and
every error names the offending key: a listener with a bad config can never succeed, so it
must say why in one line and exit (code 2) instead of crash-looping with a traceback.

For local runs any scalar key can be overridden from the environment as
``GHARC_LISTENER_<KEY>`` (upper case), e.g. ``GHARC_LISTENER_GITHUB_TOKEN`` or
``GHARC_LISTENER_MAX_RUNNERS=3``; an override wins over the file. When
``LISTENER_CONFIG_PATH`` is unset and the default file does not exist, the environment alone
is used.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gharc.api.scaleset.constants import max_runners_or_unlimited
from gharc.github.datamodel import DataModel, Rule, ValidationError
from gharc.kube.serving import host_port, serving_address
from gharc.listener.metric_limits import MAX_HISTOGRAM_BUCKETS, MAX_LABEL_VALUES, MAX_SERIES

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ENV_CONFIG_PATH",
    "ENV_PREFIX",
    "ConfigError",
    "CounterMetricConfig",
    "GaugeMetricConfig",
    "HistogramMetricConfig",
    "ListenerConfig",
    "MetricsConfig",
    "backoff_schedule",
    "load_config",
]

ENV_CONFIG_PATH = "LISTENER_CONFIG_PATH"
DEFAULT_CONFIG_PATH = "/etc/gha-listener/config.json"
ENV_PREFIX = "GHARC_LISTENER_"
MAX_INT32 = 2**31 - 1


class ConfigError(ValueError):
    """The configuration cannot work; the message is one line and names the key."""


# The config classes are dataclasses read by gharc.github.datamodel, not pydantic models:
# pydantic was most of what a pod-mode listener imported for nothing else (about 9 MiB of
# its RSS). Types, bounds and the hooks below are the reading rules, in one place each.


@dataclass(kw_only=True)
class CounterMetricConfig(DataModel):
    """Which labels a counter carries (ARC's ``v1alpha1.CounterMetric``)."""

    labels: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class GaugeMetricConfig(DataModel):
    """Which labels a gauge carries (ARC's ``v1alpha1.GaugeMetric``)."""

    labels: list[str] = field(default_factory=list)


def _strictly_increasing(value: list[float]) -> list[float]:
    if any(b <= a for a, b in itertools.pairwise(value)):
        raise ValueError("buckets must be strictly increasing")
    return value


@dataclass(kw_only=True)
class HistogramMetricConfig(DataModel):
    """Labels and buckets of a histogram (ARC's ``v1alpha1.HistogramMetric``)."""

    labels: list[str] = field(default_factory=list)
    buckets: list[float] = field(
        default_factory=list, metadata=Rule(check=_strictly_increasing).meta
    )


@dataclass(kw_only=True)
class MetricsConfig(DataModel):
    """The ``metrics`` key: which metrics exist and with which labels (None = defaults)."""

    counters: dict[str, CounterMetricConfig] = field(default_factory=dict)
    gauges: dict[str, GaugeMetricConfig] = field(default_factory=dict)
    histograms: dict[str, HistogramMetricConfig] = field(default_factory=dict)


def _app_id_text(value: Any) -> Any:
    # ARC's controller writes the app id as a string; hand-written configs use a number.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _unlimited(value: Any) -> Any:
    return max_runners_or_unlimited(value) if value is None else value


_COUNT = Rule(ge=0, le=MAX_INT32).meta


@dataclass(kw_only=True, frozen=True)
class ListenerConfig(DataModel):
    """Everything one listener needs; field names are the JSON keys ARC writes.

    Fields after ``metrics`` are gharc additions with defaults, so an ARC-written secret
    never needs them.
    """

    configure_url: str = ""
    github_token: str = field(default="", repr=False)
    github_app_id: str = field(default="", metadata=Rule(before=_app_id_text).meta)
    github_app_installation_id: int = 0
    github_app_private_key: str = field(default="", repr=False)
    vault_type: str = ""
    vault_lookup_key: str = ""
    # ARC's ``azurekeyvault.Config``: tenant_id, client_id, url, certificate_path, proxy.
    azure_key_vault: dict[str, Any] | None = None
    ephemeral_runner_set_namespace: str = ""
    ephemeral_runner_set_name: str = ""
    min_runners: int = field(default=0, metadata=_COUNT)
    # Unset (or null) means unlimited: the one default, max_runners_or_unlimited's.
    max_runners: int = field(
        default=max_runners_or_unlimited(None),
        metadata=Rule(ge=0, le=MAX_INT32, before=_unlimited).meta,
    )
    runner_scale_set_id: int = 0
    runner_scale_set_name: str = ""
    server_root_ca: str = ""
    log_level: Literal["debug", "info", "warn", "warning", "error"] = field(
        default="debug", metadata=Rule(before=_lower).meta
    )
    log_format: Literal["text", "json"] = field(default="text", metadata=Rule(before=_lower).meta)
    metrics_addr: str = ""
    metrics_endpoint: str = "/metrics"
    metrics: MetricsConfig | None = None

    # gharc: how long to wait for another listener's session to go away (409 at start-up).
    # Defaults: 10 attempts, waits 2, 4, 8, 16, 30, 30... s: about 3.5 minutes in all.
    session_conflict_attempts: int = field(default=10, metadata=Rule(ge=1).meta)
    session_conflict_initial_backoff_seconds: float = field(default=2.0, metadata=Rule(ge=0).meta)
    session_conflict_max_backoff_seconds: float = field(default=30.0, metadata=Rule(ge=0).meta)
    # gharc: how long a transient-error backoff may grow to (with jitter) in the main loop.
    transient_max_backoff_seconds: float = field(default=30.0, metadata=Rule(gt=0).meta)
    # gharc: scheduled minimums and the burst buffer (see gharc/listener/capacity.py).
    scheduled_overrides: list[dict[str, Any]] = field(default_factory=list)
    burst_runners: int = field(default=0, metadata=_COUNT)
    burst_decay_seconds: float = field(default=300.0, metadata=Rule(gt=0).meta)
    # gharc: what ``metrics`` (a tenant's listenerMetrics) may cost; see metric_limits.py.
    metrics_max_buckets: int = field(default=MAX_HISTOGRAM_BUCKETS, metadata=Rule(ge=1).meta)
    metrics_max_label_values: int = field(default=MAX_LABEL_VALUES, metadata=Rule(ge=1).meta)
    metrics_max_series: int = field(default=MAX_SERIES, metadata=Rule(ge=1).meta)

    def validate_semantics(self) -> None:
        """ARC's ``Config.Validate`` rules, in ARC's order, each naming its key."""
        if not self.configure_url:
            raise ConfigError("configure_url is not set")
        if not self.ephemeral_runner_set_namespace:
            raise ConfigError("ephemeral_runner_set_namespace is not set")
        if not self.ephemeral_runner_set_name:
            raise ConfigError("ephemeral_runner_set_name is not set")
        if self.runner_scale_set_id == 0:
            raise ConfigError("runner_scale_set_id is not set (must be non-zero)")
        if self.max_runners < self.min_runners:
            raise ConfigError(
                f"min_runners ({self.min_runners}) cannot be greater than "
                f"max_runners ({self.max_runners})"
            )
        if self.vault_type or self.vault_lookup_key:
            self._validate_vault()
        if not self.vault_type or self.has_credentials:
            # With a vault, the credentials are read at start (gharc/listener/vault.py).
            self._validate_credentials()
        self._validate_rest()

    @property
    def has_credentials(self) -> bool:
        return bool(self.github_token or self.github_app_id or self.github_app_private_key)

    def _validate_vault(self) -> None:
        """ARC's rules: a known type, a lookup key, and the type's settings."""
        if self.vault_type != "azure_key_vault":
            raise ConfigError(
                f"vault_type {self.vault_type!r} is not supported (supported: azure_key_vault)"
            )
        if not self.vault_lookup_key:
            raise ConfigError(f"vault_lookup_key is required when vault_type is {self.vault_type}")
        if not self.azure_key_vault:
            raise ConfigError("azure_key_vault is required when vault_type is azure_key_vault")
        from gharc.github.keyvault import AzureKeyVaultSettings

        problems = AzureKeyVaultSettings.from_listener_config(self.azure_key_vault).problems()
        if problems:
            raise ConfigError("azure_key_vault: " + "; ".join(problems))

    def _validate_credentials(self) -> None:
        has_token = bool(self.github_token)
        app_parts = {
            "github_app_id": bool(self.github_app_id),
            "github_app_installation_id": self.github_app_installation_id > 0,
            "github_app_private_key": bool(self.github_app_private_key),
        }
        has_app = all(app_parts.values())
        if has_token and any(app_parts.values()):
            raise ConfigError(
                "both github_token and github_app_* are set; set exactly one credential kind"
            )
        if not has_token and not has_app:
            if any(app_parts.values()):
                missing = ", ".join(k for k, ok in app_parts.items() if not ok)
                raise ConfigError(f"GitHub App credentials incomplete: {missing} not set")
            raise ConfigError(
                "no credentials: set github_token, or github_app_id, "
                "github_app_installation_id and github_app_private_key"
            )

    def _validate_rest(self) -> None:
        if self.scheduled_overrides:
            from gharc.api.schedule import ScheduleError
            from gharc.listener.capacity import CapacityPolicy

            try:
                CapacityPolicy(self.min_runners, self.scheduled_overrides)
            except ScheduleError as err:
                raise ConfigError(f"scheduled_overrides: {err}") from None
        if (
            self.session_conflict_max_backoff_seconds
            < self.session_conflict_initial_backoff_seconds
        ):
            raise ConfigError(
                "session_conflict_max_backoff_seconds cannot be below "
                "session_conflict_initial_backoff_seconds"
            )

    @property
    def metrics_enabled(self) -> bool:
        """ARC serves metrics only when an address is set; "0" is off too, as for every
        gharc address flag (:func:`gharc.kube.serving.serving_address`)."""
        return serving_address(self.metrics_addr) is not None

    @property
    def metrics_host_port(self) -> tuple[str, int]:
        """``metrics_addr`` as Go's ``net.Listen`` reads it (:func:`gharc.kube.serving.host_port`),
        or a :class:`ConfigError` naming the key."""
        try:
            return host_port(self.metrics_addr)
        except ValueError as err:
            raise ConfigError(f"metrics_addr {err}") from None


_SCALAR_KEYS = tuple(
    f.name
    for f in dataclasses.fields(ListenerConfig)
    if f.name not in ("metrics", "azure_key_vault")
)


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _SCALAR_KEYS:
        value = env.get(ENV_PREFIX + key.upper())
        if value is not None:
            out[key] = value
    raw_metrics = env.get(ENV_PREFIX + "METRICS")
    if raw_metrics is not None:
        try:
            out["metrics"] = json.loads(raw_metrics) if raw_metrics.strip() else None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{ENV_PREFIX}METRICS is not valid JSON: {err.msg}") from None
    return out


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "config"
    value = first.get("input")
    shown = (
        "" if key.startswith(("github_token", "github_app_private_key")) else f" (got {value!r})"
    )
    if len(shown) > 80:
        shown = shown[:77] + "...)"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{key}: {first['msg']}{shown}{more}"


def load_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ListenerConfig:
    """Read, override and validate; raise :class:`ConfigError` with a one-line message.

    ``path=None`` means ``$LISTENER_CONFIG_PATH``, else the default path (which may be
    absent: then the environment alone must carry the config).
    """
    env = os.environ if env is None else env
    explicit = path if path is not None else env.get(ENV_CONFIG_PATH)
    file_path = Path(explicit or DEFAULT_CONFIG_PATH)
    data: dict[str, Any] = {}
    if file_path.exists() or explicit:
        try:
            text = file_path.read_text()
        except OSError as err:
            raise ConfigError(f"cannot read config file {file_path}: {err.strerror}") from None
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(
                f"config file {file_path} is not valid JSON: {err.msg} at line {err.lineno}"
            ) from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {file_path} must hold a JSON object")
        data = loaded
    data.update(_env_overrides(env))
    # JSON null for a scalar means "unset", as Go's decoder leaves the zero value.
    data = {k: v for k, v in data.items() if v is not None or k == "metrics"}
    try:
        cfg = ListenerConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_describe(err)) from None
    cfg.validate_semantics()
    if cfg.metrics_enabled:
        cfg.metrics_host_port  # noqa: B018 - validates the address early
    return cfg


def backoff_schedule(initial: float, cap: float, attempts: int) -> list[float]:
    """Waits between ``attempts`` tries: doubling from ``initial``, capped at ``cap``."""
    waits: list[float] = []
    wait = initial
    for _ in range(max(0, attempts - 1)):
        waits.append(min(wait, cap))
        wait = min(cap, wait * 2) if wait > 0 else 0.0
    return [w if math.isfinite(w) else cap for w in waits]
