"""`python -m pipeline`: the command line (pipeline.cli)."""

from pipeline.cli import main

raise SystemExit(main())
