"""Predicates: which events are worth a reconcile at all (pkg/predicate).

Filtering here is cheaper than a no-op reconcile, but a wrong filter loses wake-ups for
good, so the defaults let everything through and each predicate is conservative: an
object without the field it compares counts as changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gharc.kube import objects
from gharc.kube.labels import Selector

__all__ = [
    "AnnotationChangedPredicate",
    "ChangedBesides",
    "Funcs",
    "GenerationChangedPredicate",
    "InNamespace",
    "LabelChangedPredicate",
    "LabelSelectorPredicate",
    "Predicate",
    "ResourceVersionChangedPredicate",
    "all_of",
    "any_of",
    "not_",
]

JSON = dict[str, Any]


class Predicate(Protocol):
    def create(self, obj: JSON) -> bool: ...

    def update(self, old: JSON, new: JSON) -> bool: ...

    def delete(self, obj: JSON) -> bool: ...


@dataclass(slots=True)
class Funcs:
    """A predicate from optional callables; a missing one lets the event through."""

    on_create: Callable[[JSON], bool] | None = None
    on_update: Callable[[JSON, JSON], bool] | None = None
    on_delete: Callable[[JSON], bool] | None = None

    def create(self, obj: JSON) -> bool:
        return self.on_create(obj) if self.on_create else True

    def update(self, old: JSON, new: JSON) -> bool:
        return self.on_update(old, new) if self.on_update else True

    def delete(self, obj: JSON) -> bool:
        return self.on_delete(obj) if self.on_delete else True


class _UpdateOnly:
    def create(self, obj: JSON) -> bool:
        return True

    def delete(self, obj: JSON) -> bool:
        return True


class GenerationChangedPredicate(_UpdateOnly):
    """Skip updates that did not change ``metadata.generation`` (status and metadata-only
    writes). Our own status patches then do not wake us up again."""

    def update(self, old: JSON, new: JSON) -> bool:
        before, after = objects.meta(old).get("generation"), objects.meta(new).get("generation")
        return before is None or after is None or before != after


class ResourceVersionChangedPredicate(_UpdateOnly):
    def update(self, old: JSON, new: JSON) -> bool:
        return objects.meta(old).get("resourceVersion") != objects.meta(new).get("resourceVersion")


class ChangedBesides(ResourceVersionChangedPredicate):
    """Skip updates that changed nothing but ``paths`` (dotted, ``"spec.replicas"``) and the
    bookkeeping every write changes (``resourceVersion``, ``managedFields``, ``generation``).

    For a watch whose reconcile reads none of ``paths``: an owner that mirrors a child's
    status need not run for each scale write the child takes. An update with the same
    resourceVersion (a resync) is skipped, as :class:`ResourceVersionChangedPredicate` does.
    """

    def __init__(self, *paths: str) -> None:
        self.paths = tuple(tuple(path.split(".")) for path in (*paths, *_BOOKKEEPING))

    def update(self, old: JSON, new: JSON) -> bool:
        return super().update(old, new) and _without(old, self.paths) != _without(new, self.paths)


_BOOKKEEPING = ("metadata.resourceVersion", "metadata.managedFields", "metadata.generation")


def _without(obj: JSON, paths: tuple[tuple[str, ...], ...]) -> JSON:
    """``obj`` with the fields at ``paths`` left out; ``obj`` itself is not changed (only the
    dicts along each path are copied)."""
    out = dict(obj)
    for path in paths:
        node = out
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                break
            copied = node[key] = dict(child)
            node = copied
        else:
            node.pop(path[-1], None)
    return out


class LabelChangedPredicate(_UpdateOnly):
    def update(self, old: JSON, new: JSON) -> bool:
        return objects.meta(old).get("labels") != objects.meta(new).get("labels")


class AnnotationChangedPredicate(_UpdateOnly):
    def update(self, old: JSON, new: JSON) -> bool:
        return objects.meta(old).get("annotations") != objects.meta(new).get("annotations")


class LabelSelectorPredicate:
    """Only objects whose labels match ``selector`` (string syntax or a dict of labels)."""

    def __init__(self, selector: str | Mapping[str, str]) -> None:
        self.selector = Selector.parse(selector)

    def create(self, obj: JSON) -> bool:
        return self.selector.matches_object(obj)

    def update(self, old: JSON, new: JSON) -> bool:
        return self.selector.matches_object(new)

    def delete(self, obj: JSON) -> bool:
        return self.selector.matches_object(obj)


class InNamespace:
    """Only objects in ``namespace`` (controller-runtime's namespace event filter): how a
    controller is scoped when its cache holds more namespaces than it reconciles."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def _holds(self, obj: JSON) -> bool:
        return (obj.get("metadata") or {}).get("namespace") == self.namespace

    def create(self, obj: JSON) -> bool:
        return self._holds(obj)

    def update(self, old: JSON, new: JSON) -> bool:
        return self._holds(new)

    def delete(self, obj: JSON) -> bool:
        return self._holds(obj)


class _Combined:
    def __init__(self, predicates: tuple[Predicate, ...], combine: Callable[[Any], bool]) -> None:
        self.predicates = predicates
        self.combine = combine

    def create(self, obj: JSON) -> bool:
        return self.combine(p.create(obj) for p in self.predicates)

    def update(self, old: JSON, new: JSON) -> bool:
        return self.combine(p.update(old, new) for p in self.predicates)

    def delete(self, obj: JSON) -> bool:
        return self.combine(p.delete(obj) for p in self.predicates)


def all_of(*predicates: Predicate) -> Predicate:
    return _Combined(predicates, all)


def any_of(*predicates: Predicate) -> Predicate:
    return _Combined(predicates, any)


class _Not:
    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate

    def create(self, obj: JSON) -> bool:
        return not self.predicate.create(obj)

    def update(self, old: JSON, new: JSON) -> bool:
        return not self.predicate.update(old, new)

    def delete(self, obj: JSON) -> bool:
        return not self.predicate.delete(obj)


def not_(predicate: Predicate) -> Predicate:
    return _Not(predicate)
