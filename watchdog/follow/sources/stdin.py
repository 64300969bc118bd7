"""The standard-input kind: a pipe (`kubectl logs -f pod | watchdog watch -`) or a redirected file, read to its end."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, aclosing
from typing import TYPE_CHECKING

from watchdog.follow.sources.base import UNYIELDED_BYTES, CaughtUp, Chunk, Source, SourceItem

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.follow.sources.target import Target

__all__ = ["StdinSource", "source"]

READ_SIZE = 1 << 16


class StdinSource:
    """Follows a file descriptor (standard input) to its end; the iteration ends there. It cannot resume: a
    pipe's bytes are read once."""

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Read from the start (a pipe has no other position); see `watchdog.follow.sources.base.Source`."""
        return aclosing(self._items())

    async def _items(self) -> AsyncGenerator[SourceItem, None]:
        fd, offset = self._fd, 0
        if stat.S_ISREG(os.fstat(fd).st_mode):  # `watch - < file`: a regular file's reads never block
            while data := os.read(fd, READ_SIZE):
                yield Chunk(offset, data)
                offset += len(data)
                if offset % UNYIELDED_BYTES < len(data):
                    await asyncio.sleep(0)  # a big file still lets the other tasks run
            yield CaughtUp(offset)
            return
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_SIZE)
        # a duplicate, so that closing the transport leaves the process's standard input open
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        try:
            while data := await reader.read(READ_SIZE):
                yield Chunk(offset, data)
                offset += len(data)
                if len(data) < READ_SIZE:  # less than asked for: what was written so far is read
                    yield CaughtUp(offset)
            yield CaughtUp(offset)
        finally:
            transport.close()


def source(target: Target, pool: SSHPool | None) -> Source:
    """Standard input (the target `-`)."""
    return StdinSource()
