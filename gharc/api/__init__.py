"""gharc.api: CRD manifests and the exact strings of both API groups.

``gharc.api.scaleset.constants`` (finalizers, labels, annotations, object names) and
``gharc.api.crds.load`` (the CRD manifests) are what other packages import; this package
imports nothing else of gharc.
"""
