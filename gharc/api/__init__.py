"""gharc.api."""
