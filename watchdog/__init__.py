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
    from watchdog.core.analyzer import Analyzer as Analyzer
    from watchdog.core.framing import Framer as Framer
    from watchdog.core.framing import Line as Line
    from watchdog.core.lifecycle import Lifecycle as Lifecycle
    from watchdog.core.lifecycle import State as State
    from watchdog.core.lifecycle import Transition as Transition
    from watchdog.core.rootcause import Error as Error
    from watchdog.exceptions import (
        AuthError as AuthError,
    )
    from watchdog.exceptions import (
        ConfigError as ConfigError,
    )
    from watchdog.exceptions import (
        ConnectionLost as ConnectionLost,
    )
    from watchdog.exceptions import (
        DeliveryError as DeliveryError,
    )
    from watchdog.exceptions import (
        HostKeyError as HostKeyError,
    )
    from watchdog.exceptions import (
        TargetError as TargetError,
    )
    from watchdog.exceptions import (
        UsageError as UsageError,
    )
    from watchdog.exceptions import (
        WatchdogError as WatchdogError,
    )
    from watchdog.follow.replay import replay_path as replay_path
    from watchdog.profiles.loader import load_profile as load_profile
    from watchdog.profiles.model import Profile as Profile

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
