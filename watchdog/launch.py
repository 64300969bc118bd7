"""Deprecated import path, kept for one release: use `watchdog.follow.follower` (`LaunchFollower`,
`Concluded`, ...), `watchdog.follow.spec` (`LaunchSpec`) and `watchdog.follow.clock`."""

from __future__ import annotations

from watchdog.follow.follower import (
    DEFAULT_QUIET,
    DEFAULT_SETTLE,
    Clock,
    Concluded,
    LaunchFollower,
    LaunchSpec,
    MonotonicClock,
    SourceNoted,
    Transitioned,
    Update,
)

__all__ = [
    "DEFAULT_QUIET",
    "DEFAULT_SETTLE",
    "Clock",
    "Concluded",
    "LaunchFollower",
    "LaunchSpec",
    "MonotonicClock",
    "SourceNoted",
    "Transitioned",
    "Update",
]
