"""`python -m watchdog`: the command line."""

from __future__ import annotations

import sys

from watchdog.cli import main

sys.exit(main())
