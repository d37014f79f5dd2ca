"""gharc.listener."""
