"""Deprecated import path, kept for one release: use `watchdog.follow.sources`."""

from __future__ import annotations

from typing import Any

from watchdog.follow.sources import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    FileMissing,
    FileRestarted,
    LocalSource,
    RestartReason,
    Source,
    SourceEvent,
    SourceItem,
    Target,
    parse_target,
    source_for,
)

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


def __getattr__(name: str) -> Any:
    """The SSH names, imported on first use (asyncssh is slow to import)."""
    import watchdog.follow.sources as moved  # noqa: PLC0415

    return getattr(moved, name)
