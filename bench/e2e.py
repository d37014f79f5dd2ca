"""End-to-end benchmark: ``python bench/e2e.py [gharc bench options]``.

The implementation is ``gharc bench`` (gharc/bench.py); this keeps ``bench/`` the one place
to look for numbers. Quick run: ``python bench/e2e.py --jobs 200 --scale-sets 5``.
"""

from __future__ import annotations

import sys

from gharc.cli import app

if __name__ == "__main__":
    app(["bench", *sys.argv[1:]])
