"""``python -m sim.cli``: the ``kaleido`` command."""

from sim.cli import main

main()
