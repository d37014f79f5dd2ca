"""``status.conditions`` in the shape of ``metav1.Condition`` (what ``kubectl wait`` reads).

Pure helpers: a reconciler computes the list it wants and writes it only when it differs,
so an unchanged condition never costs a status write (and keeps its transition time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]

TRUE = "True"
FALSE = "False"

#: AutoscalingRunnerSet: is its ``listenerTemplate`` within the listener policy?
LISTENER_TEMPLATE_ALLOWED = "ListenerTemplateAllowed"
REASON_ALLOWED = "Allowed"
REASON_UNRESTRICTED = "Unrestricted"
REASON_FORBIDDEN = "ListenerTemplateForbidden"
REASON_NOT_USED = "NotUsed"
"""In-process listeners run no pod: a template is kept, not checked, and not applied."""
#: AutoscalingRunnerSet: are its runners held below what it asks (--max-runners-per-scale-set)?
RUNNERS_CAPPED = "RunnersCapped"
REASON_CAPPED = "MaxRunnersPerScaleSet"
REASON_WITHIN_LIMIT = "WithinLimit"
#: AutoscalingRunnerSet: is its listener running? (reason: the listener's phase)
LISTENER_RUNNING = "ListenerRunning"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find(conditions: Iterable[Mapping[str, Any]] | None, kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind``, or None."""
    return next((x for x in conditions or () if x.get("type") == kind), None)


def set_condition(
    conditions: Iterable[Mapping[str, Any]] | None,
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    generation: int | None = None,
    now: Callable[[], str] = _now,
) -> list[JSON]:
    """``conditions`` with ``kind`` set; equal to the input when nothing changed.

    ``lastTransitionTime`` moves only when ``status`` flips, as ``meta.SetStatusCondition``.
    """
    current = [dict(x) for x in conditions or ()]
    old = find(current, kind)
    new: JSON = {"type": kind, "status": status, "reason": reason, "message": message}
    if generation is not None:
        new["observedGeneration"] = generation
    if old is not None and old.get("status") == status:
        new["lastTransitionTime"] = old.get("lastTransitionTime") or now()
    else:
        new["lastTransitionTime"] = now()
    if old is not None and all(old.get(k) == v for k, v in new.items()):
        return current
    return [*(x for x in current if x.get("type") != kind), new]


#: AutoscalingRunnerSet: does its runner scale set exist in GitHub, reachable with its
#: configuration? False says why (reason) and what (message): a configuration the user must
#: fix, or GitHub or Kubernetes refusing or failing a call made for this scale set.
SCALE_SET_READY = "ScaleSetReady"
REASON_READY = "Ready"
