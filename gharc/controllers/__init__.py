"""gharc.controllers."""
