#!/usr/bin/env python3
"""A CycloneDX 1.5 SBOM (JSON) of the image's Python packages, from requirements.lock.

The image installs exactly the lock (``--require-hashes``) plus gharc itself, so the lock
is the bill of materials: every package with its version, PyPI purl and the SHA-256 hashes
pip accepted. Standard library only, so the image build runs it without installing a tool.

    python scripts/sbom.py requirements.lock [--version 0.1.0] > sbom.cdx.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def locked(text: str) -> list[tuple[str, str, list[str]]]:
    """``(name, version, sha256 hashes)`` of every requirement in a hash-pinned lock."""
    out: list[tuple[str, str, list[str]]] = []
    for block in re.split(r"(?m)^(?=[A-Za-z0-9])", text):
        match = _REQ.match(block)
        if match:
            out.append((match.group(1), match.group(2), _HASH.findall(block)))
    return out


def normalize(name: str) -> str:
    """PEP 503 name, as in PyPI purls."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sbom(lock_text: str, version: str) -> dict[str, Any]:
    components = [
        {
            "type": "library",
            "bom-ref": f"pkg:pypi/{normalize(name)}@{ver}",
            "name": normalize(name),
            "version": ver,
            "purl": f"pkg:pypi/{normalize(name)}@{ver}",
            "hashes": [{"alg": "SHA-256", "content": h} for h in sorted(hashes)],
        }
        for name, ver, hashes in sorted(locked(lock_text), key=lambda x: normalize(x[0]))
    ]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, lock_text)}",
        "version": 1,
        "metadata": {
            "component": {
                "type": "application",
                "bom-ref": f"pkg:pypi/gharc@{version}",
                "name": "gharc",
                "version": version,
                "purl": f"pkg:pypi/gharc@{version}",
            }
        },
        "components": components,
        "dependencies": [
            {"ref": f"pkg:pypi/gharc@{version}", "dependsOn": [c["bom-ref"] for c in components]}
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("--version", default="0.1.0", help="gharc's version")
    args = parser.parse_args(argv)
    json.dump(sbom(args.lock.read_text(encoding="utf-8"), args.version), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
