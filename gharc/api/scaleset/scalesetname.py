"""What the Actions service refuses as a runner scale set name (and so as its label).

The scale set's name is the label jobs ``runs-on``; the service answers a create or rename
with a name it cannot use by 400 ``ArgumentException``. gharc checks the same rules before
calling it, so the scale set's status says what to change instead of repeating a 400, and
the fake GitHub (:mod:`testworld.sim.github`) refuses the same names.

CRD validation would reject these when applied, but ARC's CRD accepts any string, and a
stricter CRD would make objects already stored under ARC's CRDs unreadable for updates
(their finalizers could not be removed): the reconciler reports them instead.
"""

from __future__ import annotations

from typing import Final

#: Longest label the service stores (runner labels are ``nvarchar(256)``).
MAX_SCALE_SET_NAME_LENGTH: Final = 256


def scale_set_name_problem(name: str) -> str | None:
    """Why the service would refuse ``name``, or None when it is acceptable."""
    if not name.strip():
        return "is empty"
    if name != name.strip():
        return "starts or ends with white space"
    if len(name) > MAX_SCALE_SET_NAME_LENGTH:
        return f"is {len(name)} characters; at most {MAX_SCALE_SET_NAME_LENGTH} are allowed"
    if "," in name:
        return "contains a comma (labels are separated by commas)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "contains a control character"
    return None
