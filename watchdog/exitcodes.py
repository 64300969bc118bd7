"""Exit codes of the command line (DESIGN.md; a compatibility contract): one place, no imports."""

from __future__ import annotations

__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASHED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_VERDICT",
    "EXIT_READY",
    "EXIT_STALLED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
]

EXIT_READY = 0
EXIT_CRASHED = 1
EXIT_STALLED = 2  # also: timed out
EXIT_NO_VERDICT = 3  # the log ended still starting, or stopped cleanly
EXIT_USAGE = 64  # EX_USAGE: bad command line, unreadable input file
EXIT_UNREACHABLE = 69  # EX_UNAVAILABLE: SSH, authentication, host key
EXIT_CONFIG = 78  # EX_CONFIG: invalid configuration or profile file
EXIT_INTERRUPTED = 130  # Ctrl-C
