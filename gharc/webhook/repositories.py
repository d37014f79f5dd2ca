"""The repositories an HRA's job reservations came from, kept on the HRA itself.

The queued-job poll lists the queued and running jobs of the repositories an HRA serves.
For an organization or enterprise target those were only the repositories deliveries came
from since the server started, so a restarted server polled none of them until the next
delivery, and could not tell whether a reservation's job was still queued or running: a
``completed`` delivery lost while the server was down left its reservation, and with it an
idle runner, until the reservation expired (30 minutes by default).

So each reservation's repository goes into the HRA's annotation :data:`ANNOTATION` (a JSON
list of ``owner/name``, most recent last), written in the same patch as the reservation:
every repository that holds a reserved job is listed, across restarts and replicas. At most
:data:`CAPACITY` are kept; a list that is full may have forgotten one, so the poll does not
release reservations of that HRA (:mod:`gharc.webhook.poller`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from gharc.kube import objects

log = logging.getLogger(__name__)

ANNOTATION = "webhook.actions.summerwind.dev/repositories"
CAPACITY = 200


def read(hra: Mapping[str, Any]) -> list[str]:
    """The repositories (``owner/name``) recorded on ``hra``, oldest first; a value that is
    not ours (edited by hand) reads as none, with a warning."""
    raw = (objects.meta(hra).get("annotations") or {}).get(ANNOTATION)
    if not raw:
        return []
    try:
        data = json.loads(raw)
        if not isinstance(data, list):
            raise TypeError("not a list")
        return [str(x) for x in data if isinstance(x, str) and "/" in x]
    except (ValueError, TypeError) as err:
        name = objects.meta(hra).get("name")
        log.warning("ignoring annotation %s of HRA %s: %s", ANNOTATION, name, err)
        return []


def render(known: Iterable[str], added: Iterable[str]) -> str:
    """The annotation's new value: ``known`` plus ``added`` (moved last), the oldest
    dropped beyond :data:`CAPACITY`."""
    out = list(dict.fromkeys(known))
    for repo in added:
        if repo in out:
            out.remove(repo)
        out.append(repo)
    return json.dumps(out[-CAPACITY:], separators=(",", ":"))
