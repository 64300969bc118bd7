"""Byte sources: follow a log (a file, locally or over SSH; a container; journald; a pod; standard input) as
chunks at absolute offsets and events; the kinds are listed in `kinds.KINDS`.

The names are loaded when first used: `import watchdog.follow.sources.target` (what the config needs)
must not pull in asyncio through the local source, nor asyncssh (a quarter of a second) through SSH.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdog.follow.sources.base import (
        Aged,
        CaughtUp,
        Chunk,
        Connected,
        Disconnected,
        Ended,
        FileMissing,
        FileRestarted,
        KeepsPrevious,
        Merges,
        Pushes,
        RestartReason,
        Source,
        SourceEvent,
        SourceItem,
        Streamed,
    )
    from watchdog.follow.sources.kinds import KINDS, Kind
    from watchdog.follow.sources.local import LocalSource
    from watchdog.follow.sources.open import open_source
    from watchdog.follow.sources.ssh import SSHSource
    from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
    from watchdog.follow.sources.target import Target, parse_target

__all__ = [
    "KINDS",
    "Aged",
    "CaughtUp",
    "Chunk",
    "Connected",
    "Disconnected",
    "Ended",
    "FileMissing",
    "FileRestarted",
    "KeepsPrevious",
    "Kind",
    "LocalSource",
    "Merges",
    "Pushes",
    "RestartReason",
    "SSHOptions",
    "SSHPool",
    "SSHSource",
    "Source",
    "SourceEvent",
    "SourceItem",
    "Streamed",
    "Target",
    "open_source",
    "parse_target",
]

_MODULE = {
    "KINDS": "kinds",
    "Kind": "kinds",
    "LocalSource": "local",
    "open_source": "open",
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
