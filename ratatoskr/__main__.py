"""``python -m ratatoskr``: the command line."""

from ratatoskr.cli import main

raise SystemExit(main())
