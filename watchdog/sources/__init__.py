"""Byte sources: follow a log file, locally or over SSH, as chunks at absolute offsets and events."""

from __future__ import annotations

from watchdog.sources.base import (
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
from watchdog.sources.local import LocalSource
from watchdog.sources.open import source_for
from watchdog.sources.ssh import SSHSource
from watchdog.sources.sshpool import SSHOptions, SSHPool
from watchdog.sources.target import Target, parse_target

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
