"""Deprecated import path, kept for one release: use `watchdog.follow.follower` (`LaunchFollower`,
`Concluded`, ...), `watchdog.follow.spec` (`LaunchSpec`) and `watchdog.clock`."""

from __future__ import annotations

from watchdog.follow.follower import *  # noqa: F403
from watchdog.follow.follower import __all__  # noqa: F401
