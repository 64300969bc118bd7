"""watchdog: follows LLM inference-server launches and says ready, crashed (and why) or stalled.

The public surface is re-exported here (lazily, so that `watchdog --version` stays fast); everything else
may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_EXPORTS = {
    "Analyzer": "watchdog.analyzer",
    "Error": "watchdog.errors",
    "AuthError": "watchdog.exceptions",
    "ConfigError": "watchdog.exceptions",
    "ConnectionLost": "watchdog.exceptions",
    "DeliveryError": "watchdog.exceptions",
    "HostKeyError": "watchdog.exceptions",
    "TargetError": "watchdog.exceptions",
    "UsageError": "watchdog.exceptions",
    "WatchdogError": "watchdog.exceptions",
    "Framer": "watchdog.framing",
    "Line": "watchdog.framing",
    "Lifecycle": "watchdog.lifecycle",
    "State": "watchdog.lifecycle",
    "Transition": "watchdog.lifecycle",
    "Profile": "watchdog.profile",
    "load_profile": "watchdog.profile",
    "replay_path": "watchdog.replay",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'watchdog' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
