"""Fixtures of the listener's integration tests (defined in ``listener_world``)."""

from listener_world import unused_port, world

__all__ = ["unused_port", "world"]
