"""Label and annotation propagation helpers (spec §5.1).

Every object the scale set controllers build takes its labels from a parent object plus
some computed keys. Two rules are shared by all of them, so they live here:

* labels can be filtered by prefix (``--exclude-label-propagation-prefix``): users put
  tooling labels (Argo CD, Flux, policy engines) on the AutoscalingRunnerSet that must not be
  copied onto hundreds of runner pods, where the tooling would then try to own them;
* annotations are never filtered.

The functions return ``None`` when both inputs are ``None``, as ARC does, so a builder can
leave ``metadata.labels`` out entirely instead of writing an empty map (which would make a
merge patch of an unchanged object non-empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def is_excluded(key: str, exclude_prefixes: Iterable[str]) -> bool:
    """True when ``key`` starts with one of ``exclude_prefixes`` (a prefix may be a full key)."""
    return any(key.startswith(prefix) for prefix in exclude_prefixes if prefix)


def filter_labels(
    labels: Mapping[str, str] | None, exclude_prefixes: Iterable[str] = ()
) -> dict[str, str]:
    """Copy of ``labels`` without the keys that start with an excluded prefix."""
    prefixes = tuple(exclude_prefixes)
    return {k: v for k, v in (labels or {}).items() if not is_excluded(k, prefixes)}


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    exclude_prefixes: Iterable[str] = (),
) -> dict[str, str] | None:
    """ARC ``filterAndMergeLabels``: ``base`` then ``overwrite`` (overwrite wins), filtered.

    Keys that start with any of ``exclude_prefixes`` are skipped from BOTH maps, so a
    computed label is never dropped unless the user excluded its prefix explicitly.
    Returns ``None`` if both maps are ``None``.
    """
    if base is None and overwrite is None:
        return None
    prefixes = tuple(exclude_prefixes)
    merged = filter_labels(base, prefixes)
    merged.update(filter_labels(overwrite, prefixes))
    return merged


def merge_annotations(
    base: Mapping[str, str] | None, overwrite: Mapping[str, str] | None
) -> dict[str, str] | None:
    """ARC ``mergeAnnotations``: clone ``base``, copy ``overwrite`` over it; no filtering.

    Returns ``None`` if both maps are ``None``.
    """
    if base is None and overwrite is None:
        return None
    merged = dict(base or {})
    merged.update(overwrite or {})
    return merged


def merge_missing(
    base: Mapping[str, str] | None, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """Copy of ``base`` plus the keys of ``extra`` it does not already have (base wins).

    Used where ARC adds template labels "only for keys not already present" (listener pod).
    """
    merged = dict(base or {})
    for key, value in (extra or {}).items():
        merged.setdefault(key, value)
    return merged
