"""Small helpers the AutoscalingRunnerSet and AutoscalingListener reconcilers share.

Events come from :mod:`gharc.controllers.scaleset.events`, finalizers from
:mod:`gharc.kube.finalizers`, object readers from :mod:`gharc.kube.objects`; this module
only adds tolerating an object that vanished while we removed our finalizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gharc.kube import errors as kerrors
from gharc.kube import finalizers
from gharc.kube.client import KubeClient
from gharc.kube.resources import Resource


async def remove_finalizer(
    kube: KubeClient, resource: Resource, obj: Mapping[str, Any], finalizer: str
) -> None:
    """:func:`gharc.kube.finalizers.remove_finalizer`, where an object already gone is fine."""
    try:
        await finalizers.remove_finalizer(kube, resource, obj, finalizer)
    except kerrors.NotFound:
        pass
