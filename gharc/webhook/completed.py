"""The jobs an HRA's ``completed`` events released, kept on the HRA itself.

A ``queued`` event can arrive after its job's ``completed`` one: GitHub redelivers a
delivery that failed (by hand, through the API, or a proxy retries it) under a new
delivery ID, and the queued-job poll can list a job a moment before it completes. The
batch scaler refuses such a late ``queued`` by remembering the completed jobs, but memory
alone does not survive a restart of the webhook server, nor reach another replica of it:
after either, the late ``queued`` reserved a runner that no job would ever use, and the
RunnerDeployment kept refilling it until the reservation expired (30 minutes by default).

So the completed jobs go into the HRA's annotation :data:`ANNOTATION` (job id to the
epoch second it may be forgotten), written in the same optimistic-lock patch as the
reservation change: a job whose release is stored is also stored as completed. Entries
live :data:`TTL` seconds (a redelivery comes within minutes; a ``queued`` delivered even
later adds a reservation that expires as any other) and at most :data:`CAPACITY` are kept,
oldest forgotten first, so the annotation stays under 100 KB.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from gharc.kube import objects

log = logging.getLogger(__name__)

ANNOTATION = "webhook.actions.summerwind.dev/completed-jobs"
TTL = 3600.0
CAPACITY = 4000


def read(hra: Mapping[str, Any], now: float) -> dict[str, int]:
    """The unexpired completed jobs of ``hra`` (reservation name to expiry), oldest first.
    A value that is not ours (edited by hand) is ignored with a warning, not fatal: the
    in-memory record still refuses the late events of this process."""
    raw = (objects.meta(hra).get("annotations") or {}).get(ANNOTATION)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        entries = {str(k): int(v) for k, v in data.items()}
    except (ValueError, TypeError, AttributeError) as err:
        log.warning(
            "ignoring annotation %s of HRA %s: %s", ANNOTATION, objects.meta(hra).get("name"), err
        )
        return {}
    return {k: v for k, v in sorted(entries.items(), key=lambda kv: kv[1]) if v > now}


def render(entries: Mapping[str, int], added: Iterable[str], now: float) -> str:
    """The annotation's new value: ``entries`` plus ``added`` (kept ``TTL`` from ``now``),
    the soonest to expire dropped beyond ``CAPACITY``."""
    out = {k: v for k, v in entries.items() if v > now}
    for key in added:
        out.pop(key, None)
        out[key] = int(now + TTL)
    kept = sorted(out.items(), key=lambda kv: kv[1])[-CAPACITY:]
    return json.dumps(dict(kept), separators=(",", ":"))
