"""watchdog: follows LLM inference-server launches and says ready, crashed (and why) or stalled.

The public surface is re-exported here lazily (so that `watchdog --version` stays fast); everything else
may change.

This file is shared: the unrelated PyPI package `watchdog` (file events) installs into the same
`site-packages/watchdog/` directory, and whichever of the two is installed last owns `__init__.py`; after
one of them is uninstalled there is none and `watchdog` is a namespace package. So no module of this
project relies on anything defined here (they import `from watchdog.<module> import <name>`, and so
should scripts that need to work beside the other package). When this file is the one on disk, the other
package imports it too: it imports no module of ours and only defines the lazy lookup below, which answers
nothing but the names listed (a submodule such as `watchdog.events` is found by the import system as usual).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdog.core.analyzer import Analyzer
    from watchdog.core.framing import Framer, Line
    from watchdog.core.lifecycle import Lifecycle, State, Transition
    from watchdog.core.rootcause import Error
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
    from watchdog.follow.replay import replay_path
    from watchdog.profiles.loader import load_profile
    from watchdog.profiles.model import Profile

_EXPORTS = {
    "Analyzer": "watchdog.core.analyzer",
    "Error": "watchdog.core.rootcause",
    "AuthError": "watchdog.exceptions",
    "ConfigError": "watchdog.exceptions",
    "ConnectionLost": "watchdog.exceptions",
    "DeliveryError": "watchdog.exceptions",
    "HostKeyError": "watchdog.exceptions",
    "TargetError": "watchdog.exceptions",
    "UsageError": "watchdog.exceptions",
    "WatchdogError": "watchdog.exceptions",
    "Framer": "watchdog.core.framing",
    "Line": "watchdog.core.framing",
    "Lifecycle": "watchdog.core.lifecycle",
    "State": "watchdog.core.lifecycle",
    "Transition": "watchdog.core.lifecycle",
    "Profile": "watchdog.profiles.model",
    "load_profile": "watchdog.profiles.loader",
    "replay_path": "watchdog.follow.replay",
}

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
    "Transition",
    "UsageError",
    "WatchdogError",
    "load_profile",
    "replay_path",
]


def __getattr__(name: str) -> Any:
    """The re-exports, imported on first use (a name not listed is a submodule or an AttributeError)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'watchdog' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
