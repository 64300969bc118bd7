"""Open the source for a target: its kind's module (`kinds.KINDS`), imported when first needed."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

from watchdog.follow.sources.kinds import KINDS

if TYPE_CHECKING:
    from watchdog.follow.sources.base import Source
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.follow.sources.target import Target

__all__ = ["open_source"]


class _Module(Protocol):
    def source(self, target: Target, pool: SSHPool | None) -> Source: ...


def open_source(target: Target, pool: SSHPool | None = None) -> Source:
    """The source that follows `target`, made by its kind's module.

    Raises:
        ValueError: the target is on an SSH host and no pool was given, or its kind is not known.
    """
    kind = KINDS.get(target.kind)
    if kind is None:
        raise ValueError(f"unknown source kind {target.kind!r}")
    if target.host is not None and pool is None:
        raise ValueError(f"{target} is on an SSH host: an SSHPool is needed to follow it")
    module: _Module = importlib.import_module(f"watchdog.follow.sources.{kind.module}")
    return module.source(target, pool)
