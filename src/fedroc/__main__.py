"""Run the command line as ``python -m fedroc`` (the same as the ``fedroc`` command)."""

from fedroc.cli import main

main()
