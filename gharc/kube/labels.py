"""Label selectors evaluated locally, with the API server's string syntax.

The cache answers ``list(..., label_selector=...)`` from memory, so it must agree with the
server on what a selector means: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a`` (exists) and ``!a`` (does not exist), comma-separated and ANDed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gharc.kube import objects

__all__ = ["Requirement", "Selector"]

_SET_RE = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label, as on the server.
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    """An AND of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | Mapping[str, str] | None) -> Selector:
        if text is None:
            return cls()
        if not isinstance(text, str):
            return cls.from_labels(text)
        reqs: list[Requirement] = []
        for part in _split(text):
            part = part.strip()
            if not part:
                continue
            if m := _SET_RE.match(part):
                values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
                reqs.append(Requirement(m.group(1), m.group(2), values))
            elif "!=" in part:
                key, value = part.split("!=", 1)
                reqs.append(Requirement(key.strip(), "!=", frozenset({value.strip()})))
            elif "=" in part:
                key, value = part.split("==", 1) if "==" in part else part.split("=", 1)
                reqs.append(Requirement(key.strip(), "=", frozenset({value.strip()})))
            elif part.startswith("!"):
                reqs.append(Requirement(part[1:].strip(), "!"))
            else:
                reqs.append(Requirement(part, "exists"))
        return cls(tuple(reqs))

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Selector:
        return cls(tuple(Requirement(k, "=", frozenset({v})) for k, v in sorted(labels.items())))

    @classmethod
    def from_label_selector(cls, spec: Mapping[str, Any]) -> Selector:
        """From a ``metav1.LabelSelector`` dict (``matchLabels`` and ``matchExpressions``)."""
        reqs = list(cls.from_labels(spec.get("matchLabels") or {}).requirements)
        ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
        for expr in spec.get("matchExpressions") or ():
            reqs.append(
                Requirement(expr["key"], ops[expr["operator"]], frozenset(expr.get("values") or ()))
            )
        return cls(tuple(reqs))

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        return self.matches(objects.meta(obj).get("labels"))


def _split(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
