"""Reading Kubernetes objects as plain dicts: metadata, finalizers, times, drift, Secrets.

gharc speaks dicts (see :mod:`gharc.kube.client`), so every controller needs the same
small readers. They live here once so that both API groups and the listener agree on what
"deleting", "has a finalizer", "a metav1.Time" and "the same spec" mean. This module
imports nothing but the standard library, so :mod:`gharc.api` may use it too.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

__all__ = [
    "annotations_of",
    "decode_secret_data",
    "deleting_since",
    "finalizers_with",
    "finalizers_without",
    "format_time",
    "has_finalizer",
    "int_or",
    "int_or_none",
    "is_deleting",
    "labels_of",
    "meta",
    "parse_time",
    "prune_empty",
    "semantically_equal",
    "spec_of",
    "status_of",
]


# --- metadata ----------------------------------------------------------------------------


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata``, or an empty mapping for an object without one."""
    return obj.get("metadata") or {}


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec``, or an empty mapping: a fresh object may have none, and a controller reads
    an unset spec as all defaults rather than failing."""
    return obj.get("spec") or {}


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``status``, or an empty mapping: nothing has been reported yet (the API server
    drops an empty status, so a new object has none)."""
    return obj.get("status") or {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.annotations`` (empty when unset), safe to modify."""
    return dict(meta(obj).get("annotations") or {})


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.labels`` (empty when unset), safe to modify."""
    return dict(meta(obj).get("labels") or {})


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once ``metadata.deletionTimestamp`` is set: only finalizers keep it alive."""
    return bool(meta(obj).get("deletionTimestamp"))


def deleting_since(obj: Mapping[str, Any]) -> dt.datetime | None:
    """When deletion was requested (``metadata.deletionTimestamp``), None while the object
    is not being deleted: how long a finalizer has held an object counts from here."""
    return parse_time(meta(obj).get("deletionTimestamp"))


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in (meta(obj).get("finalizers") or ())


def finalizers_with(obj: Mapping[str, Any], *names: str) -> list[str]:
    """``metadata.finalizers`` with each of ``names`` appended where missing: the list to
    write back to add ours without dropping anybody else's (a merge patch replaces lists)."""
    out = list(meta(obj).get("finalizers") or ())
    out.extend(n for n in dict.fromkeys(names) if n not in out)
    return out


def finalizers_without(obj: Mapping[str, Any], *names: str) -> list[str]:
    """``metadata.finalizers`` less ``names``, the others kept in order: the list to write
    back to remove ours only."""
    return [f for f in meta(obj).get("finalizers") or () if f not in names]


# --- numbers -----------------------------------------------------------------------------


def int_or(value: Any, default: int = 0) -> int:
    """``int(value)``, or ``default`` for anything that does not parse: a field or annotation
    someone else wrote badly is read as unset rather than failing the reconcile."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def int_or_none(value: Any) -> int | None:
    """``int(value)``, or None for an unset value or one that does not parse."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --- metav1.Time -------------------------------------------------------------------------


def parse_time(value: Any, *, strict: bool = False) -> dt.datetime | None:
    """An aware UTC datetime from an RFC 3339 string; None for None or "".

    An unparseable value is None by default: a time the API server or another controller
    wrote that we cannot read is treated as unset rather than failing the reconcile. With
    ``strict`` it raises ``ValueError`` instead, for times a user wrote in a spec (schedules,
    reservations), which must be reported, not ignored. A datetime passes through (naive
    ones are taken as UTC).
    """
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        if strict:
            raise ValueError(f"not an RFC 3339 time: {value!r}") from None
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def format_time(t: dt.datetime) -> str:
    """``metav1.Time`` form, ``2024-05-01T12:00:00Z``: UTC, sub-second precision dropped."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- drift -------------------------------------------------------------------------------


def prune_empty(value: Any) -> Any:
    """``value`` with None, ``[]`` and ``{}`` removed from maps, recursively; None if nothing
    is left. List positions matter (containers, env order), so an emptied list item stays,
    as ``{}``."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            pruned = prune_empty(item)
            if pruned is not None:
                out[key] = pruned
        return out or None
    if isinstance(value, list):
        kept = [{} if v is None else v for v in (prune_empty(v) for v in value)]
        return kept or None
    return value


def semantically_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` differ only in absent, None, ``[]`` or ``{}`` fields.

    The API server serialises with ``omitempty``: ``env: []`` or ``resources: {}`` written
    by a user reads back as absent, and a defaulted list item may read back as ``{}`` where
    we wrote None. An absent field and an empty one are therefore the same thing:
    ``({}, None)`` and ``([None], [{}])`` are equal. Treating them as different is "drift"
    that would rebuild every idle runner, or rewrite the listener, on every resync.
    """
    return bool(prune_empty(a) == prune_empty(b))


# --- Secrets -----------------------------------------------------------------------------


def decode_secret_data(secret: Mapping[str, Any], *, errors: str = "strict") -> dict[str, str]:
    """A Secret's ``data``, base64-decoded to text, with ``stringData`` on top.

    The API server folds ``stringData`` into ``data`` on write, but a Secret from a fake or
    an unsaved manifest may still carry it, and it wins there as it would on the server.
    ``errors`` is as for ``bytes.decode``: ``"replace"`` where values are only compared.
    """
    out = {
        k: base64.b64decode(v).decode(errors=errors) for k, v in (secret.get("data") or {}).items()
    }
    out.update(secret.get("stringData") or {})
    return out
