"""The command line: `watchdog replay | watch | run | check-config | demo | history | alerts ...`."""

from __future__ import annotations

from watchdog.cli.app import main

__all__ = ["main"]
