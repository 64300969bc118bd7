"""Byte sources: follow a log file, locally or over SSH, as chunks at absolute offsets and events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from watchdog.follow.sources.target import Target, parse_target

if TYPE_CHECKING:
    from watchdog.follow.sources.ssh import SSHSource
    from watchdog.follow.sources.sshpool import SSHOptions, SSHPool

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


_SSH_NAMES = {
    "SSHSource": "watchdog.follow.sources.ssh",
    "SSHOptions": "watchdog.follow.sources.sshpool",
    "SSHPool": "watchdog.follow.sources.sshpool",
}


def __getattr__(name: str) -> Any:
    # asyncssh (a quarter of a second to import) only when something remote is asked for
    module = _SSH_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    return getattr(importlib.import_module(module), name)
