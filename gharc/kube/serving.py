"""The address flags of gharc's HTTP servers: which spellings mean "off".

ARC's ``--metrics-addr``, ``--listener-metrics-addr`` and the listener config's
``metrics_addr`` all turn their server off with ``"0"`` or an empty value. The controller,
the webhook server, the listener config the controller writes and the listener itself read
that rule here. It imports nothing: the pod-mode listener imports it and must stay lean,
and it may not import :mod:`gharc.settings`.
"""

from __future__ import annotations

__all__ = ["serving_address"]


def serving_address(addr: str) -> str | None:
    """The bind address of an address flag, or None for ARC's "off" spellings ``0`` and ``""``."""
    addr = addr.strip()
    return None if addr in ("", "0") else addr
