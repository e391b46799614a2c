"""``python -m inftda_duckdb.tools.cli``: the ``inftda-duckdb`` command line."""

import sys

from . import main

sys.exit(main())
