"""End-to-end benchmark: ``python bench/e2e.py [bench options]``.

The implementation is ``python -m testworld bench`` (testworld/bench.py); this keeps
``bench/`` the one place to look for numbers. Quick run:
``python bench/e2e.py --jobs 200 --scale-sets 5``.
"""

from __future__ import annotations

import sys

from testworld.cli import app

if __name__ == "__main__":
    app(["bench", *sys.argv[1:]])
