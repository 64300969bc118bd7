"""Choose the source for a target: a local file, or a file on an SSH host through the shared pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchdog.follow.sources.base import Source
from watchdog.follow.sources.local import LocalSource
from watchdog.follow.sources.target import Target

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool


def source_for(target: Target, pool: SSHPool | None = None) -> Source:
    """The source that follows `target`: local for a path, over `pool`'s connection for a host.

    Raises:
        ValueError: the target is remote and no pool was given.
    """
    if target.host is None:
        return LocalSource(target.path)
    if pool is None:
        raise ValueError(f"{target} is remote: an SSHPool is needed to follow it")
    from watchdog.follow.sources.ssh import SSHSource  # noqa: PLC0415 - asyncssh only for a remote target

    return SSHSource(pool, target.host, target.path, port=target.port, user=target.user)
