"""Deprecated import path, kept for one release: use `watchdog.follow` (`LaunchFollower`, `LaunchSpec`, ...)."""

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
