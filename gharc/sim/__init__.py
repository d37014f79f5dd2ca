"""gharc.sim."""
