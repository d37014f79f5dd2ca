"""Typed views of the AutoscalingRunnerSet spec and its shared sub-types.

The CRD schema accepts whatever ARC's accepted (types only), so an object stored under
ARC's CRDs stays writable after the switch. These models hold the rules the schema leaves
out (``minRunners <= maxRunners``, a non-empty URL and secret, label lengths, the vault
type): the ARS controller parses the spec once per reconcile, reports a violation in the
object's status, and gets defaults right (``maxRunners`` nil means unlimited, an empty
``runnerGroup`` the default group) and builds proxy secrets from the result. Pod templates
stay plain dicts: they are copied into child objects, never inspected field by field, and
the hot paths (informer caches, diffing) work on dicts anyway.

Unknown keys are ignored, not rejected, so a newer CRD never breaks an older controller.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gharc.api.scaleset import constants as c


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class ResourceMeta(_Model):
    """ARC ``ResourceMeta``: labels/annotations for an object the controller creates."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ProxyServerConfig(_Model):
    """One proxy (``http`` or ``https``) and the Secret with its credentials."""

    url: str = ""
    credential_secret_ref: str = Field("", alias="credentialSecretRef")


def _with_userinfo(url: str, auth: tuple[str, str] | None) -> str:
    """``url`` with ``user:password@`` injected, escaped as Go's ``url.UserPassword``."""
    if not url or auth is None:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    # Go escapes everything in userinfo except unreserved and "$&+,;=".
    user, password = (quote(x, safe="$&+,;=") for x in auth)
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


class ProxyConfig(_Model):
    """ARC ``ProxyConfig``."""

    http: ProxyServerConfig | None = None
    https: ProxyServerConfig | None = None
    no_proxy: list[str] = Field(default_factory=list, alias="noProxy")

    def credential_secret_names(self) -> list[str]:
        """Secrets (keys ``username``/``password``) the controller must read."""
        names = [p.credential_secret_ref for p in (self.http, self.https) if p]
        return sorted({n for n in names if n})

    def to_secret_data(
        self,
        http_auth: tuple[str, str] | None = None,
        https_auth: tuple[str, str] | None = None,
    ) -> dict[str, str]:
        """ARC ``ToSecretData``: the proxy env vars; all three keys always present."""
        return {
            c.ENV_HTTP_PROXY: _with_userinfo(self.http.url, http_auth) if self.http else "",
            c.ENV_HTTPS_PROXY: _with_userinfo(self.https.url, https_auth) if self.https else "",
            c.ENV_NO_PROXY: ",".join(self.no_proxy),
        }


class ConfigMapKeySelector(_Model):
    """Core ``ConfigMapKeySelector``."""

    name: str = ""
    key: str
    optional: bool | None = None


class CertificateSource(_Model):
    """Where a CA bundle comes from."""

    config_map_key_ref: ConfigMapKeySelector | None = Field(None, alias="configMapKeyRef")


class TLSConfig(_Model):
    """ARC ``TLSConfig`` (``githubServerTLS``)."""

    certificate_from: CertificateSource | None = Field(None, alias="certificateFrom")


class AzureKeyVaultConfig(_Model):
    """Azure Key Vault coordinates."""

    url: str
    tenant_id: str = Field(alias="tenantId")
    client_id: str = Field(alias="clientId")
    certificate_path: str = Field(alias="certificatePath")
    secret_key: str = Field("", alias="secretKey")


#: Vault types the controller and listener can read credentials from.
VAULT_TYPES = ("azure_key_vault",)


class VaultConfig(_Model):
    """ARC ``VaultConfig``: read the GitHub credentials from a vault instead of a Secret."""

    type: str = ""
    azure_key_vault: AzureKeyVaultConfig | None = Field(None, alias="azureKeyVault")
    proxy: ProxyConfig | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value and value not in VAULT_TYPES:
            raise ValueError(f"vault type {value!r} is not supported (supported: azure_key_vault)")
        return value


class MetricLabels(_Model):
    """A counter or gauge and its labels."""

    labels: list[str] = Field(default_factory=list)


class HistogramMetric(_Model):
    """A histogram, its labels and buckets."""

    labels: list[str] = Field(default_factory=list)
    buckets: list[float] | None = None


class MetricsConfig(_Model):
    """ARC ``MetricsConfig`` (listener metrics selection)."""

    counters: dict[str, MetricLabels] | None = None
    gauges: dict[str, MetricLabels] | None = None
    histograms: dict[str, HistogramMetric] | None = None


class AutoscalingRunnerSetSpec(_Model):
    """``AutoscalingRunnerSet.spec``. Use :meth:`parse` on the object's ``spec`` dict."""

    github_config_url: str = Field(alias="githubConfigUrl", min_length=1)
    github_config_secret: str = Field(alias="githubConfigSecret", min_length=1)
    runner_group: str = Field("", alias="runnerGroup")
    runner_scale_set_name: str = Field("", alias="runnerScaleSetName")
    runner_scale_set_labels: list[str] = Field(default_factory=list, alias="runnerScaleSetLabels")
    proxy: ProxyConfig | None = None
    github_server_tls: TLSConfig | None = Field(None, alias="githubServerTLS")
    vault_config: VaultConfig | None = Field(None, alias="vaultConfig")
    template: dict[str, Any] = Field(default_factory=dict)
    listener_template: dict[str, Any] | None = Field(None, alias="listenerTemplate")
    listener_metrics: MetricsConfig | None = Field(None, alias="listenerMetrics")
    autoscaling_listener: ResourceMeta | None = Field(None, alias="autoscalingListener")
    listener_service_account_metadata: ResourceMeta | None = Field(
        None, alias="listenerServiceAccountMetadata"
    )
    listener_role_metadata: ResourceMeta | None = Field(None, alias="listenerRoleMetadata")
    listener_role_binding_metadata: ResourceMeta | None = Field(
        None, alias="listenerRoleBindingMetadata"
    )
    listener_config_secret_metadata: ResourceMeta | None = Field(
        None, alias="listenerConfigSecretMetadata"
    )
    ephemeral_runner_set_metadata: ResourceMeta | None = Field(
        None, alias="ephemeralRunnerSetMetadata"
    )
    ephemeral_runner_metadata: ResourceMeta | None = Field(None, alias="ephemeralRunnerMetadata")
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = Field(
        None, alias="ephemeralRunnerConfigSecretMetadata"
    )
    min_runners: int | None = Field(None, alias="minRunners", ge=0)
    max_runners: int | None = Field(None, alias="maxRunners", ge=0)

    @field_validator("runner_scale_set_labels")
    @classmethod
    def _label_lengths(cls, labels: list[str]) -> list[str]:
        for label in labels:
            if not label or len(label) >= c.MAX_SCALE_SET_LABEL_LENGTH:
                raise ValueError(
                    f"runner scale set label {label!r} must be 1 to "
                    f"{c.MAX_SCALE_SET_LABEL_LENGTH - 1} characters long"
                )
        return labels

    @model_validator(mode="after")
    def _min_le_max(self) -> AutoscalingRunnerSetSpec:
        if (
            self.min_runners is not None
            and self.max_runners is not None
            and self.min_runners > self.max_runners
        ):
            raise ValueError("minRunners must be less than or equal to maxRunners")
        return self

    @classmethod
    def parse(cls, spec: dict[str, Any]) -> AutoscalingRunnerSetSpec:
        """Validate an ARS ``spec`` dict (raises ``pydantic.ValidationError``)."""
        return cls.model_validate(spec)

    @property
    def effective_min_runners(self) -> int:
        """``minRunners``, nil meaning 0."""
        return self.min_runners or 0

    @property
    def effective_max_runners(self) -> int:
        """``maxRunners``, nil meaning unlimited (``MaxInt32``, as ARC tells the listener)."""
        return c.max_runners_or_unlimited(self.max_runners)
