"""Time helpers of the legacy controllers that :mod:`gharc.kube.objects` does not have.

``parse_time`` and ``format_time`` (``metav1.Time``) live in :mod:`gharc.kube.objects`.
"""

from __future__ import annotations

import datetime as dt


def from_timestamp(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)
