"""gharc: ephemeral, autoscaling GitHub Actions runners on Kubernetes, compatible with ARC."""

__version__ = "0.1.0"
