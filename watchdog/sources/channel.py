"""The output of one remote command as one ordered queue (stdout, stderr, close), with flow control."""

from __future__ import annotations

import math
from contextlib import suppress
from typing import Literal

import anyio
import asyncssh

__all__ = ["CommandOutput", "Kind", "Packet"]

# Packets (up to 32 KiB each) queued before the channel stops reading; the SSH window then
# stops the remote tail, so a slow consumer never makes this process buffer a whole log.
_HIGH_WATER = 64
_LOW_WATER = 8

Kind = Literal["out", "err", "closed"]
Packet = tuple[Kind, bytes, Exception | None]


class CommandOutput(asyncssh.SSHClientSession[bytes]):
    """Queues stdout, stderr and the close of one remote command in the order they arrived.

    Used as the session factory of `SSHClientConnection.create_session`; `receive` returns
    ("out", data, None), ("err", data, None) or, last, ("closed", b"", exc).
    """

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[Packet](math.inf)
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self._paused = False

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        kind: Kind = "err" if datatype == asyncssh.EXTENDED_DATA_STDERR else "out"
        self._put((kind, data, None))
        if (
            not self._paused
            and self._chan is not None
            and self._send.statistics().current_buffer_used >= _HIGH_WATER
        ):
            self._paused = True
            self._chan.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._put(("closed", b"", exc))
        self._send.close()

    def _put(self, packet: Packet) -> None:
        # The reader may have gone away already: then nothing wants this any more.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._send.send_nowait(packet)

    async def receive(self) -> Packet:
        try:
            packet = await self._receive.receive()
        except anyio.EndOfStream:
            return ("closed", b"", None)
        if (
            self._paused
            and self._chan is not None
            and self._receive.statistics().current_buffer_used <= _LOW_WATER
        ):
            self._paused = False
            self._chan.resume_reading()
        return packet

    @property
    def exit_status(self) -> int | None:
        """The remote command's exit status, once it has exited (None before, or when it was killed)."""
        return self._chan.get_exit_status() if self._chan is not None else None

    def close(self) -> None:
        """Close the channel: the remote script sees EOF on stdin and kills its tail."""
        if self._chan is not None:
            self._chan.close()
        self._receive.close()
