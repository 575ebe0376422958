"""``python -m r2s2r.cli``: the r2s2r command line."""

from r2s2r.cli import main

main()
