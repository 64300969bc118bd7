"""watchdog: follows LLM inference-server launches and says ready, crashed (and why) or stalled.

The public surface is re-exported here; everything else may change.
"""

from __future__ import annotations

from watchdog.analyzer import Analyzer
from watchdog.errors import Error
from watchdog.exceptions import (
    AuthError,
    ConfigError,
    ConnectionLost,
    DeliveryError,
    HostKeyError,
    TargetError,
    UsageError,
    WatchdogError,
)
from watchdog.framing import Framer, Line
from watchdog.lifecycle import Lifecycle, State, Transition
from watchdog.profile import Profile, load_profile
from watchdog.replay import replay_path

__all__ = [
    "Analyzer",
    "AuthError",
    "ConfigError",
    "ConnectionLost",
    "DeliveryError",
    "Error",
    "Framer",
    "HostKeyError",
    "Lifecycle",
    "Line",
    "Profile",
    "State",
    "TargetError",
    "UsageError",
    "WatchdogError",
    "Transition",
    "load_profile",
    "replay_path",
]
