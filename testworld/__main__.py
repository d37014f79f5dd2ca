"""``python -m testworld``: see :mod:`testworld.cli`."""

from testworld.cli import main

main()
