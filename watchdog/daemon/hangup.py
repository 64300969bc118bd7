"""SIGHUP held from the first moment of `watchdog run`: noted for a reload, never the default (death)."""

from __future__ import annotations

import signal
from types import FrameType

_pending = False


def _note(signum: int, frame: FrameType | None) -> None:
    global _pending  # noqa: PLW0603 - a signal handler has only module state to write to
    _pending = True


def hold() -> None:
    """Catch SIGHUP from now on (until the daemon's own handler replaces this one): each is a reload owed.

    Called first thing by `watchdog run`, before the config is read and the daemon's libraries imported
    (1-2 s): a SIGHUP then (a `systemctl reload` right after the start) would otherwise end the process.
    """
    signal.signal(signal.SIGHUP, _note)


def take() -> bool:
    """Whether a SIGHUP came since `hold` (or the last `take`); forgets it."""
    global _pending
    came, _pending = _pending, False
    return came
