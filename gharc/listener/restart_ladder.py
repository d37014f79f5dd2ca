"""B1: how long a failed listener waits before it is started again.

One ladder for both listener modes: the AutoscalingListener controller paces a listener pod
with it, the in-process host paces each hosted listener with it. Two copies of these numbers
once disagreed (one capped at 80 s, the other at 160 s), so a listener's backoff depended on
its mode; docs/behaviours.md (B1) states these values.
"""

from __future__ import annotations

#: Seconds before restarting after the n-th consecutive failure (1-based), then capped.
LISTENER_RESTART_LADDER: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


def restart_delay(failures: int, ladder: tuple[float, ...] = LISTENER_RESTART_LADDER) -> float:
    """The wait after the ``failures``-th consecutive failure: none before the first, the
    ladder's last step once the failures outnumber its steps."""
    if failures <= 0 or not ladder:
        return 0.0
    return ladder[min(failures, len(ladder)) - 1]
