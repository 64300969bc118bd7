"""The output of one remote command as one ordered queue (stdout, stderr, close), with flow control."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Literal, Protocol

from watchdog.clock import wake_up
from watchdog.follow.sources.asyncssh_quiet import asyncssh
from watchdog.follow.sources.packets import direct_data

# Packets (up to 32 KiB each) queued before the channel stops reading; the SSH window then
# stops the remote tail, so a slow consumer never makes this process buffer a whole log.
_HIGH_WATER = 64
_LOW_WATER = 8
# stdout of one read joined (`begin_read`) up to this many bytes a piece: a piece is no larger than a packet can be,
# so the high-water mark bounds what is queued as before
_JOIN_MAX = 32 * 1024

_PACKET_DEBUG_LEVEL = 3  # asyncssh's debug level from which packets are logged

Kind = Literal["out", "err", "closed", "woken"]
Packet = tuple[Kind, bytes, Exception | None]
# what a `CommandOutput.drive` did with a packet: not taken (queued as usual); taken, the reader sleeps on; taken,
# the reader is woken (its `receive` returns a ("woken", b"", None) packet: something is left for its task)
NOT_TAKEN, TAKEN, TAKEN_WAKE = 0, 1, 2


class Channel(Protocol):
    """What a `CommandOutput` asks of its channel: an asyncssh channel, or a multiplexed reader's end
    (`watchdog.follow.sources.mux`)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_exit_status(self) -> int | None: ...

    def close(self) -> None: ...


class _Reads(threading.local):
    """Per thread (an event loop's): the sessions holding stdout in the read of a connection now being parsed
    (`begin_read`), else None."""

    holding: list[CommandOutput] | None = None


_reads = _Reads()


def begin_read() -> bool:
    """A connection's read is about to be parsed: each session's stdout in it is held and handed on joined, one
    piece per session, at `end_read` (a log's packets that piled up while the daemon was busy cost one chunk, not
    one each). False when a read is already being parsed (a connection tunnelled through another's channel):
    that read's `end_read` hands on this one's too."""
    if _reads.holding is not None:
        return False
    _reads.holding = []
    return True


def end_read() -> None:
    """The read is parsed: each session hands on the stdout it held, in the order the sessions first had some."""
    sessions, _reads.holding = _reads.holding, None
    _release(sessions or [], 0)


def _release(sessions: list[CommandOutput], start: int) -> None:
    for index in range(start, len(sessions)):
        try:
            sessions[index].release()
        except BaseException:
            _release(sessions, index + 1)  # the others' all the same
            raise


def unlogged_packets(chan: object) -> bool:
    """Let the channel `chan` skip asyncssh's per-packet debug log while asyncssh's debug level is below the
    packets' (3, `asyncssh.set_debug_level`); whether it was done.

    asyncssh describes every packet a channel sends or receives (a copy of its payload, its type's name, its
    size in words) and only then asks whether its debug level is high enough to log it: a log's channel
    receives a packet per few lines, so that is most of what it costs beyond its decryption."""
    level = getattr(asyncssh.logging.SSHLogger, "_debug_level", None)
    if not isinstance(level, int) or level >= _PACKET_DEBUG_LEVEL:
        return False
    if not hasattr(chan, "log_received_packet") or not hasattr(chan, "log_sent_packet"):
        return False
    chan.log_received_packet = chan.log_sent_packet = _unlogged
    return True


def _unlogged(*_args: object) -> None:
    """A packet not described (see `unlogged_packets`)."""


class CommandOutput(asyncssh.SSHClientSession[bytes]):
    """Queues stdout, stderr and the close of one remote command in the order they arrived.

    Used as the session factory of `SSHClientConnection.create_session`; `receive` returns
    ("out", data, None), ("err", data, None) or, last, ("closed", b"", exc). A deque and a future, not an
    anyio stream: this is every SSH packet's path, and the stream's bookkeeping cost more than the rest.

    `drive`: while the reader waits with nothing queued, a packet is offered to it first, in the callback that
    brings it (asyncssh's pass over what the connection received: every log of the host's in one go), without
    waking the reader's task; it says what it did (`NOT_TAKEN`, `TAKEN`, `TAKEN_WAKE`).

    While `drive` is set, within a read of the connection (`begin_read` .. `end_read`) stdout is held and handed
    on joined at its end (or before stderr or the close that follow it, or in pieces of `_JOIN_MAX` bytes): one
    packet for all of it.
    """

    def __init__(self) -> None:
        self._packets: deque[Packet] = deque()
        self._waiter: asyncio.Future[None] | None = None  # the reader's, while it waits
        self._ended = False  # the close was taken by the reader
        self._chan: Channel | None = None
        self._paused = False
        self._discard = False  # closed by the reader: what comes is dropped
        # made by asyncssh in the event loop; kept, as asking for the running loop costs CPython 3.11 a getpid()
        # system call (its fork check), and `receive` makes a future for each packet
        self._loop = asyncio.get_running_loop()
        self.drive: Callable[[Packet], int] | None = None
        self._held: list[bytes] = []  # stdout of the read being parsed (`begin_read`), not yet handed on
        self._held_bytes = 0

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan
        unlogged_packets(chan)
        direct_data(chan)

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype is None:  # stdout
            holding = _reads.holding
            if holding is not None and self.drive is not None:
                held = self._held
                if not held:
                    holding.append(self)
                elif self._held_bytes + len(data) > _JOIN_MAX:
                    self.release()  # (still in `holding`: the next piece is handed on at the end)
                    held = self._held
                held.append(data)
                self._held_bytes += len(data)
                return
            self._put(("out", data, None))
        else:
            self.release()  # what came before it first
            self._put(("err", data, None))
        self._pause_if_full()

    def release(self) -> None:
        """Hand on the stdout held in a read (`begin_read`), joined."""
        held = self._held
        if held:
            self._held, self._held_bytes = [], 0
            self._put(("out", held[0] if len(held) == 1 else b"".join(held), None))
            # `_pause_if_full`, inline (each read of a followed log)
            if not self._paused and self._chan is not None and len(self._packets) >= _HIGH_WATER:
                self._paused = True
                self._chan.pause_reading()

    def _pause_if_full(self) -> None:
        if not self._paused and self._chan is not None and len(self._packets) >= _HIGH_WATER:
            self._paused = True
            self._chan.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.release()
        self._put(("closed", b"", exc))

    def _put(self, packet: Packet) -> None:
        if self._discard:
            return
        waiter = self._waiter
        if waiter is not None and self.drive is not None and not self._packets and not waiter.done():
            taken = self.drive(packet)
            if taken == TAKEN:
                return
            if taken == TAKEN_WAKE:
                packet = ("woken", b"", None)
        self._packets.append(packet)
        if waiter is not None:
            wake_up(waiter)

    async def receive(self) -> Packet:
        while not self._packets:
            if self._ended:
                return ("closed", b"", None)
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        packet = self._packets.popleft()
        if packet[0] == "closed":
            self._ended = True
        if self._paused and self._chan is not None and len(self._packets) <= _LOW_WATER:
            self._paused = False
            self._chan.resume_reading()
        return packet

    @property
    def queued(self) -> bool:
        """Whether `receive` has something to return at once (it will not wait)."""
        return bool(self._packets)

    @property
    def exit_status(self) -> int | None:
        """The remote command's exit status, once it has exited (None before, or when it was killed)."""
        return self._chan.get_exit_status() if self._chan is not None else None

    def close(self) -> None:
        """Close the channel: the remote script sees EOF on stdin and kills its tail."""
        if self._chan is not None:
            self._chan.close()
        self._discard = True  # nothing wants what still comes
        self._packets.clear()
