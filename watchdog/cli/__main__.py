"""`python -m watchdog.cli`."""

import sys

from watchdog.cli.app import main

sys.exit(main())
