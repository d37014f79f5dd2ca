"""testworld.sim."""
