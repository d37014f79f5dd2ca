"""gharc.kube."""
