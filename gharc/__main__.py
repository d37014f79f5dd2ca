"""``python -m gharc`` runs the CLI, so a pod or a simulator can start it without a script."""

from gharc.cli import main

main()
