"""gharc.webhook."""
