"""Byte sources: follow a log file, locally or over SSH, as chunks at absolute offsets and events.

The names are loaded when first used: `import watchdog.follow.sources.target` (what the config needs)
must not pull in asyncio through the local source, nor asyncssh (a quarter of a second) through SSH.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdog.follow.sources.base import (
        CaughtUp,
        Chunk,
        Connected,
        Disconnected,
        FileMissing,
        FileRestarted,
        RestartReason,
        Source,
        SourceEvent,
        SourceItem,
    )
    from watchdog.follow.sources.local import LocalSource
    from watchdog.follow.sources.open import source_for
    from watchdog.follow.sources.ssh import SSHSource
    from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
    from watchdog.follow.sources.target import Target, parse_target

__all__ = [
    "CaughtUp",
    "Chunk",
    "Connected",
    "Disconnected",
    "FileMissing",
    "FileRestarted",
    "LocalSource",
    "RestartReason",
    "SSHOptions",
    "SSHPool",
    "SSHSource",
    "Source",
    "SourceEvent",
    "SourceItem",
    "Target",
    "parse_target",
    "source_for",
]

_MODULE = {
    "LocalSource": "local",
    "source_for": "open",
    "SSHSource": "ssh",
    "SSHOptions": "sshpool",
    "SSHPool": "sshpool",
    "Target": "target",
    "parse_target": "target",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE.get(name, 'base')}"), name)
