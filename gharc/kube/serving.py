"""The address flags of gharc's HTTP servers: which spellings mean "off", and how an
address splits into the host and port to bind.

ARC's ``--metrics-addr``, ``--listener-metrics-addr`` and the listener config's
``metrics_addr`` all turn their server off with ``"0"`` or an empty value. The controller,
the webhook server, the listener config the controller writes and the listener itself read
that rule here, and the ``[host]:port`` reading that the manager's and the webhook
server's sockets, the listener's metrics server and the listener pod's container port
share. It imports nothing: the pod-mode listener imports it and must stay lean,
and it may not import :mod:`gharc.settings`.
"""

from __future__ import annotations

__all__ = ["host_port", "serving_address"]


def serving_address(addr: str) -> str | None:
    """The bind address of an address flag, or None for ARC's "off" spellings ``0`` and ``""``."""
    addr = addr.strip()
    return None if addr in ("", "0") else addr


def host_port(addr: str) -> tuple[str, int]:
    """``[host]:port`` as Go's ``net.Listen`` reads it, as ARC's servers take it: no host is
    every interface (``0.0.0.0``), brackets around an IPv6 host are dropped, no port is 0
    (a free one). Raises ValueError for a port that is not a number from 0 to 65535."""
    host, _, port = addr.strip().rpartition(":")
    try:
        number = int(port or 0)
    except ValueError:
        raise ValueError(f"{addr.strip()!r} is not [host]:port") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{addr.strip()!r}: port out of range")
    return host.strip("[]") or "0.0.0.0", number
