"""The file kind: a local file, or a file on an SSH host through the shared pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchdog.follow.sources.base import Source
from watchdog.follow.sources.local import LocalSource

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.follow.sources.target import Target

__all__ = ["source"]


def source(target: Target, pool: SSHPool | None) -> Source:
    """The source that follows the file `target` names: local for a path, over `pool`'s connection for a host."""
    if target.host is None or pool is None:
        return LocalSource(target.path)
    from watchdog.follow.sources.ssh import SSHSource  # noqa: PLC0415 - asyncssh only for a remote target

    return SSHSource(pool, target.host, target.path, port=target.port, user=target.user)
