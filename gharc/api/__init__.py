"""gharc.api: CRD manifests and the exact strings of both API groups.

``gharc.api.scaleset.constants`` (finalizers, labels, annotations, object names) and
``gharc.api.crds.load`` (the CRD manifests) are what other packages import, and
``gharc.api.resources`` gives the client the REST resources of gharc's kinds. Of the rest of
gharc this package imports only the standard-library-only ``gharc.kube.objects`` and
``gharc.kube.resources``.
"""
