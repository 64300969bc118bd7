"""Follow a file on another host over a shared SSH connection, resuming at the exact byte after a drop."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from typing import cast

import anyio
import anyio.lowlevel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from watchdog.backoff import FULL_JITTER, backoff, wait_backoff
from watchdog.exceptions import ChannelRefused, ConnectionLost, ReaderProtocolError, TargetError, UsageError
from watchdog.follow.sources.asyncssh_quiet import asyncssh
from watchdog.follow.sources.base import (
    UNYIELDED_BYTES,
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    FileMissing,
    FileRestarted,
    RestartReason,
    SourceItem,
)
from watchdog.follow.sources.channel import NOT_TAKEN, TAKEN, TAKEN_WAKE, CommandOutput, Packet
from watchdog.follow.sources.identity import IDENTITY_WINDOW, FileIdentity, parse_identity
from watchdog.follow.sources.remote import (
    IDENTIFY_NAME,
    STREAM_NAME,
    Header,
    identity_args,
    parse_header,
    parse_process_line,
    parse_stat_line,
    poll_command,
    stream_args,
)
from watchdog.follow.sources.sshpool import SSHPool
from watchdog.vocabulary import DEFAULT_STAT_INTERVAL

DEFAULT_POLL_INTERVAL = 0.25
DEFAULT_TAIL_INTERVAL = 0.01
DEFAULT_POLL_BYTES = 1 << 20
RETRY_INITIAL = 0.1
RETRY_MAX = 5.0
# A reader that starts and fails at once (it ends before its header; the session is lost each time although
# the login works) is started again after a pause that doubles per failure, up to this; said (`Disconnected`)
# at the `READER_FAILS_SAID`-th failure in a row, and `Connected` once it reads again
READER_RETRY_MAX = 60.0
READER_FAILS_SAID = 3
_HEADER_LIMIT = 4096
# Samples after a rotation is seen before switching even if the old file still grows.
_ROTATION_GRACE_SAMPLES = 8
# The first bytes of the file are its fingerprint (as Vector and Fluent Bit have it): a log cut and written again
# in one go (`: > log` and a relaunch's first lines within one of tail's polls) keeps its inode, and its size
# may come back the same, but its first bytes (a banner with its times) differ. They are compared on the host
# when bytes come after the log was quiet this long: a relaunch follows a quiet log (the old server died), and
# a log that never stops costs no command.
FINGERPRINT = 256
FINGERPRINT_QUIET = 2.0


class SSHSource:
    """A file on a remote host, streamed by one remote `tail` per follower over a shared connection.

    The remote command (see `watchdog.follow.sources.remote.STREAM_SCRIPT`) opens the file once, reports
    its inode and size, streams from the exact offset with GNU `tail -c +N -f`, and reports when what the path
    names changes (a second GNU tail follows the path by name), so rotation (new inode at the path), replacement
    (the old file deleted) and truncation (GNU tail's notice) are seen without a second command.
    After a rotation the old file is read on until it stops growing (two equal samples, or at
    most 8 samples), then `FileRestarted` and the new file from offset 0. Without GNU tail it
    falls back to polling reads every `poll_interval` (a rotation then cannot drain the old file).

    A dropped connection gives `Disconnected`, is retried with exponential backoff and jitter
    (full jitter, 0.1 s doubling, capped at 5 s), gives `Connected`, and reading resumes at the
    first byte not yet delivered: nothing is lost or repeated, unless the file changed meanwhile
    (then `FileRestarted`). `HostKeyError`, `AuthError` and `UsageError` end the iteration.
    Each command runs in a channel of the pool's connections to the host (another connection is
    opened when the server refuses a channel: sshd's MaxSessions). When no connection will take
    one, the refusal is reported as `Disconnected` and retried with the same backoff.

    A log cut and written again in one go (the size may come back the same) is told by its first `FINGERPRINT`
    bytes and the last `FINGERPRINT` bytes read (a relaunch within the same second has the same banner), compared
    on the host when bytes come after `FINGERPRINT_QUIET` seconds of quiet: then
    `FileRestarted("truncated")` and the file from 0 (a rewrite to the same size with nothing after it is seen
    at the next write).

    A copytruncate that is immediately followed by new writes can leave those first new bytes
    delivered before `FileRestarted` (GNU tail resumes at offset 0 before its notice reaches
    us); the restart then reads them again as the start of the new file.
    """

    def __init__(
        self,
        pool: SSHPool,
        host: str,
        path: str,
        *,
        port: int | None = None,
        user: str | None = None,
        stream: bool | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        stat_interval: float | None = None,
        tail_interval: float = DEFAULT_TAIL_INTERVAL,
        connect_attempts: int = 3,
        reconnect_attempts: int | None = None,
    ) -> None:
        """Describe the remote file; nothing connects until `open_follow`.

        Args:
            pool: the shared connections.
            host: host name, address or ~/.ssh/config alias.
            path: the log file on the host (relative paths start in the remote home).
            port: SSH port (None: from the config, else 22).
            user: remote user (None: from the config, else the local user).
            stream: True to require streaming, False to poll, None to stream where GNU tail exists.
            poll_interval: seconds between reads when polling, and between looks for a missing file.
            stat_interval: seconds between the remote script's rotation checks (None: the pool's
                `SSHOptions.stat_interval`, else `DEFAULT_STAT_INTERVAL`).
            tail_interval: the remote tail's `-s` interval (it bounds the added latency).
            connect_attempts: attempts for the first connection before ConnectionLost is raised.
            reconnect_attempts: attempts after a drop before ConnectionLost (None: forever).
        """
        if stat_interval is None:  # the host's setting, else the default
            stat_interval = pool.options.stat_interval or DEFAULT_STAT_INTERVAL
        if min(poll_interval, stat_interval, tail_interval) <= 0:
            raise ValueError("intervals must be positive")
        if connect_attempts < 1:
            raise ValueError("connect_attempts must be at least 1")
        self.pool = pool
        self.host = host
        self.path = path
        self.port = port
        self.user = user
        self.stream = stream
        self.poll_interval = poll_interval
        self.stat_interval = stat_interval
        self.tail_interval = tail_interval
        self.connect_attempts = connect_attempts
        self.reconnect_attempts = reconnect_attempts
        self._latest: _Follower | None = (
            None  # the last `open_follow`'s state: its header tells the file's age
        )

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the file from byte `offset` (a file needs no cursor); see `watchdog.follow.sources.base.Source`."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        follower = self._latest = _Follower(self, offset)
        return aclosing(_Resumable(follower))

    def unmodified_for(self) -> float | None:
        """Seconds the file has not grown, as of now (see `watchdog.follow.sources.base.Aged`): from the reader's
        header, the age its host's clock gave (less the second its truncated modification time may hide) plus
        the time since; 0 once more than the header's size was read; None before a header, or from a reader
        that did not say it."""
        follower = self._latest
        if follower is None or follower.header_age is None:
            return None
        age, size, at = follower.header_age
        if max(follower.offset, follower.known_size) > size:  # read past it, or a stat sample saw it grow
            return 0.0
        return max(0.0, age - 1.0) + (time.monotonic() - at)

    async def identify(self, offset: int, *, window: int = IDENTITY_WINDOW) -> FileIdentity | None:
        """What the file at the path is, read around `offset` on the host (see `watchdog.follow.sources.identity`);
        None if there is no readable regular file there. `window`: the bytes read at the start and before the
        offset.

        Raises:
            ConnectionLost: the host could not be reached in `connect_attempts` attempts.
            HostKeyError, AuthError: as from the pool.
        """
        args = identity_args(self.path, offset, window=window)
        # Tries again what lost its connection, after a jittered exponential pause, `connect_attempts` times.
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.connect_attempts),
            wait=wait_backoff(first=RETRY_INITIAL, cap=RETRY_MAX, jitter=FULL_JITTER),
            retry=retry_if_exception_type(ConnectionLost),
            sleep=anyio.sleep,
            reraise=True,
        )
        stdout: bytes = await retrying(self._read_to_end, IDENTIFY_NAME, args)
        return parse_identity(stdout, offset, window=window)

    async def _read_to_end(self, name: str, args: list[str]) -> bytes:
        """Run the reader script `name` with `args` on the host to its end: its stdout. Through the host's
        multiplexer where it runs one (`SSHPool.open_reader`): no channel of its own to open and close.

        Raises:
            ConnectionLost: as from the pool, or the script's output was cut before its exit status (its
                connection, or the multiplexer that ran it, ended first): what it said is not all it would say.
        """
        conn, output = await self.pool.open_reader(self.host, name, args, port=self.port, user=self.user)
        out: list[bytes] = []
        ended: Exception | None = None
        closed = False
        try:
            while not closed:
                kind, data, ended = await output.receive()
                if kind == "out":
                    out.append(data)
                closed = kind == "closed"
        finally:
            # cancelled: its reader ends (its channel closed, or its stdin through the multiplexer)
            if not closed:
                output.close()
        if output.exit_status is None:
            reason = str(ended or ("closed" if conn.is_closed() else f"{name} ended without an exit status"))
            raise ConnectionLost(f"connection to {self.host} lost: {reason}", host=self.host, reason=reason)
        return b"".join(out)


@dataclass(frozen=True)
class _Rotation:
    """A new file is at the path; the old one is still being read."""

    size: int  # the old file's size in the latest sample
    reason: RestartReason
    samples: int  # samples since the change was seen
    quiet: bool  # the old file's size did not change between the last two samples


class _Restart(Exception):
    """Internal: the current remote command is done; start another (after `delay` seconds, or the reader's
    backoff when it `failed`)."""

    def __init__(self, delay: float = 0.0, *, failed: bool = False) -> None:
        self.delay = delay
        self.failed = failed


class _Resumable:
    """The consumer's iterator: `_Follower.items`, made again after a wait of the consumer's was cancelled.

    A cancellation that reaches into the generator ends it (closing its remote command); the follower's state
    (offset, file, what was said but not yet taken) is kept, so the next item comes from a new generator that
    opens a new command at the first byte not yet delivered: nothing lost or repeated.
    """

    def __init__(self, follower: _Follower) -> None:
        self._follower = follower
        self._items: AsyncGenerator[SourceItem, None] | None = None
        self._ended = False

    @property
    def merge(self) -> bool:
        """`Merges`: a read's CaughtUp comes with its last chunk (set by the consumer before its first item)."""
        return self._follower.merge

    @merge.setter
    def merge(self, merge: bool) -> None:
        self._follower.merge = merge

    @property
    def push(self) -> Callable[[SourceItem], object] | None:
        """`Pushes`: a live read taken in asyncssh's pass over what the host's connection received (set by the
        consumer before its first item, with `merge`)."""
        return self._follower.push

    @push.setter
    def push(self, push: Callable[[SourceItem], object] | None) -> None:
        self._follower.push = push

    def __aiter__(self) -> _Resumable:
        return self

    async def __anext__(self) -> SourceItem:
        if self._ended:
            raise StopAsyncIteration
        if self._items is None:
            self._items = self._follower.items()
        try:
            return await self._items.__anext__()
        except anyio.get_cancelled_exc_class():
            self._items = None  # ended by the cancellation: the next call resumes
            raise
        except BaseException:
            self._ended = True
            raise

    async def aclose(self) -> None:
        """Close the generator (and with it the remote command), if one is running."""
        items, self._items = self._items, None
        if items is not None:
            await items.aclose()


class _Follower:
    """The state of one `open_follow`: where we are in which file, across commands and connections.

    `items` is an async generator run by the consumer's own task: no producer task and no stream between
    them, so a chunk costs one wake-up of the consumer (when the channel's data arrives) and no more.
    What a step says is queued in `out` and handed over before the next wait.
    """

    def __init__(self, source: SSHSource, offset: int) -> None:
        self.src = source
        self.out: deque[SourceItem] = deque()
        self.offset = offset
        self.inode: int | None = None
        self.file: tuple[int, int] | None = None  # (device, inode) of the file read, if its header said both
        self.pending: RestartReason | None = None
        self.streaming = source.stream
        self.announced_missing = False
        self.rotation: _Rotation | None = None
        self.known_size = 0  # the file's size as last seen (header or stat sample)
        self.at_end = False  # CaughtUp sent and nothing delivered since
        self.merge = False  # `Merges`: a chunk that reaches the end is its CaughtUp as well
        self.push: Callable[[SourceItem], object] | None = None  # `Pushes` (with `merge`): see `_drive`
        # what `push` raised in `_drive`, for the consumer's task to raise
        self.failed: Exception | None = None
        self.errors = b""  # the streaming reader's stderr not yet a whole line
        self.refusals = 0  # channels refused in a row (Disconnected was sent at the first)
        self.unyielded = 0  # bytes delivered since the consumer last let other tasks run
        self.connected = False  # Connected was said once (a resumed generator does not connect first)
        self.head = b""  # the current file's first FINGERPRINT bytes, as delivered
        self.last = b""  # its last FINGERPRINT bytes delivered (those just before `offset`)
        self.quiet_since: float | None = None  # monotonic time the reader reached the end, while it is there
        self.down: str | None = None  # the reason Disconnected last said, until Connected
        self.failing = 0  # reader starts in a row that did not get to read (no header, or the session lost)
        # the process and process group of the latest streaming reader (its `P` line): the next one ends that
        # group if it still runs (a cut connection sshd did not see leaves it running with its stdin open)
        self.remote: tuple[int, int] | None = None
        # the latest header's age (seconds, by the host's clock), the size it gave, and when it was read (monotonic)
        self.header_age: tuple[float, int, float] | None = None

    async def items(self) -> AsyncGenerator[SourceItem, None]:
        pause, reconnect = 0.0, not self.connected
        failed = 0  # connection attempts failed in a row
        while True:
            # what a step said is handed over before any wait: the next command, a pause, a reconnection
            while self.out:
                yield self.out.popleft()
            if pause:
                await anyio.sleep(pause)
                pause = 0.0
            if reconnect:
                began = time.monotonic()
                try:
                    await self._connect()
                except ConnectionLost as exc:
                    # said at the first failed attempt, not after the last: an unreachable host is news at
                    # once (its alert counts from when that attempt began), while the attempts go on
                    failed += 1
                    self._down(str(exc), since=began)
                    limit = self.src.reconnect_attempts if self.connected else self.src.connect_attempts
                    if limit is not None and failed >= limit:
                        raise
                    pause = backoff(failed, first=RETRY_INITIAL, cap=RETRY_MAX, jitter=FULL_JITTER)
                    continue
                failed, reconnect = 0, False
                if self.failing > 1:  # logins work, sessions do not: not at once again
                    pause = self._backoff()
                continue
            try:
                if self.streaming is False:
                    if await self._poll_once():
                        pause = self.src.poll_interval
                else:
                    # the streaming reader's items, read here (not through a generator of its own: a layer
                    # less for each item to pass)
                    conn, session = await self._open_stream()
                    if self.push is not None and self.merge:
                        session.drive = self._drive
                    try:
                        self.errors = b""
                        while True:
                            while self.out:
                                yield self.out.popleft()
                            if self.failed is not None:
                                error, self.failed = self.failed, None
                                raise error
                            if not session.queued:
                                self.unyielded = 0  # the receive below waits: other tasks run
                            elif self.unyielded > UNYIELDED_BYTES:
                                self.unyielded = 0
                                # a backlog read in bulk lets other tasks run
                                await anyio.lowlevel.checkpoint()
                            kind, data, ended = await session.receive()
                            if kind == "out":
                                if self.at_end and self._quiet_ended():
                                    await self._check_fingerprint()  # the stream goes on queueing meanwhile
                                self._deliver(data)
                                self._check_rotation()
                            elif kind == "woken":
                                pass  # `_drive` left items in `out` (or an error) for this task
                            elif kind == "err":
                                *lines, self.errors = (self.errors + data).split(b"\n")
                                for line in lines:
                                    self._on_status(line)
                                self._caught_up()
                            else:
                                raise self._lost(conn, ended)
                    finally:
                        session.drive = None
                        session.close()
            except _Restart as restart:
                pause = max(restart.delay, self._backoff()) if restart.failed else restart.delay
            except ChannelRefused as exc:
                # The host is up but takes no more channels now: say so once, then retry after a
                # pause (reconnecting would not help, and a tight loop would not either).
                if not self.refusals:
                    self.out.append(Disconnected(self.src.host, str(exc)))
                self.refusals += 1
                # jittered: the followers refused together do not all come back together
                pause = backoff(self.refusals, first=RETRY_INITIAL, cap=RETRY_MAX)
            except ConnectionLost as exc:
                self._down(str(exc))
                self.refusals = 0
                self.failing += 1
                reconnect = True

    def _drive(self, packet: Packet) -> int:
        # `CommandOutput.drive`: the streaming reader's bytes, come while this follow's task waits for them, taken
        # here as `items` would take them (delivered, then each item handed to `push`) unless something needs the
        # task: a fingerprint check after a quiet spell, a rotation to drain, items already waiting, a status line.
        kind, data, _ = packet
        if self.out or self.rotation is not None or self.failed is not None:
            return NOT_TAKEN
        if kind == "err":
            return self._drive_status(data)
        if kind != "out":
            return NOT_TAKEN
        if self.at_end:
            quiet = self.quiet_since
            if quiet is not None and time.monotonic() - quiet >= FINGERPRINT_QUIET:
                return NOT_TAKEN  # `_check_fingerprint` first, in the task
            self.quiet_since = None  # as `_quiet_ended` has it
        self._deliver(data)
        self.unyielded = 0  # handed over now: nothing is held back from other tasks
        return self._hand_out()

    def _drive_status(self, data: bytes) -> int:
        # `_drive` for the reader's status lines (its stderr): taken here, as the task would take them, when they
        # are whole lines that only say what is (its process, a sample of the same file, the stat loop's wait).
        # Else the task takes them: a line in pieces, the reader's end, a truncation, a rotation begun. Taken
        # here, a status line that comes just before an append does not send that append through the task.
        if self.errors or not data.endswith(b"\n"):
            return NOT_TAKEN
        lines = data[:-1].split(b"\n")
        for line in lines:
            if line == b"E" or b"file truncated" in line:
                return NOT_TAKEN
            stat = parse_stat_line(line)
            if stat is not None and stat.inode == self.inode and stat.path_inode not in (None, stat.inode):
                return NOT_TAKEN
        for line in lines:
            self._on_status(line)
        self._caught_up()
        return self._hand_out()

    def _hand_out(self) -> int:
        # the items a drive left in `out`, each handed to `push`; the first it gives back waits for the task
        push = self.push
        assert push is not None
        try:
            while self.out:
                back = push(self.out.popleft())
                if back is not None:
                    self.out.appendleft(cast("SourceItem", back))  # the consumer's task gives it in its place
                    return TAKEN_WAKE
        except Exception as exc:  # raised by the consumer's task, as its own handling's error would be
            self.failed = exc
            return TAKEN_WAKE
        return TAKEN

    def _backoff(self) -> float:
        """The pause before the next start of a reader that failed `failing` times in a row: doubled per
        failure, jittered (half to all of it), at most `READER_RETRY_MAX`."""
        return backoff(self.failing, first=RETRY_INITIAL, cap=READER_RETRY_MAX)

    def _reader_failed(self, why: str) -> _Restart:
        """The reader ended before it could read: tried again after a growing pause; said once, at the
        `READER_FAILS_SAID`-th failure in a row (a host that cannot be followed is an outage to alert on)."""
        self.failing += 1
        if self.failing == READER_FAILS_SAID:
            self._down(f"the log reader on {self.src.host} fails at once ({why}); trying again with a pause")
        return _Restart(self.src.poll_interval, failed=True)

    def _down(self, reason: str, since: float | None = None) -> None:
        # Disconnected once per outage, and again only when the reason changes (it says what happens now)
        if reason != self.down:
            self.down = reason
            self.out.append(Disconnected(self.src.host, reason, since=since))

    async def _connect(self) -> None:
        src = self.src
        await src.pool.connect(src.host, port=src.port, user=src.user)
        self.connected, self.down = True, None
        self.out.append(Connected(src.host))

    def _channel_opened(self) -> None:
        if self.refusals:
            self.refusals = 0
            self.out.append(Connected(self.src.host))

    def _restart_from_zero(self, reason: RestartReason) -> _Restart:
        self.pending = reason
        self.offset = 0
        self.inode = self.file = None
        self.rotation = None
        self.head = self.last = b""
        return _Restart()

    def _quiet_ended(self) -> bool:
        """Bytes came after the reader reached the end: whether it had been quiet there for `FINGERPRINT_QUIET`
        (then `_check_fingerprint`); a plain call, so that the usual append (not after a quiet spell) makes no
        coroutine."""
        quiet, self.quiet_since = self.quiet_since, None
        return quiet is not None and time.monotonic() - quiet >= FINGERPRINT_QUIET

    async def _check_fingerprint(self) -> None:
        """Bytes came after a quiet spell (`_quiet_ended`): if the file's first bytes on the host are no longer
        those read, it was cut and written again (the bytes at the offset are not an append): read it again
        from 0."""
        src, want = self.src, min(FINGERPRINT, self.offset)
        if not want:
            return
        # its first bytes, and those just before the offset: a relaunch within the same second rewrites the
        # banner with the same times, not the same last lines
        identity = await src.identify(self.offset, window=FINGERPRINT)
        if identity is None or identity.inode != self.inode:
            return  # gone or another file: the stat loop says so
        if len(self.head) < want:
            self.head = identity.head  # resumed past them: they are as they are now
        elif identity.head != self.head[:want]:
            raise self._restart_from_zero("truncated")
        if len(self.last) < want:
            self.last = identity.before  # resumed: as they are now
        elif identity.before != self.last:
            raise self._restart_from_zero("truncated")

    def _accept_header(self, header: Header | None, stderr: bytes = b"") -> None:
        """Act on a script's header; returns only for `ok` on the file we mean to read."""
        if header is None:
            # The script ended before its header (the file vanished between test and open, once; a host
            # whose reader cannot run, every time)
            said = stderr.decode(errors="replace").strip().splitlines()
            raise self._reader_failed(
                f"it ended before its header: {said[-1][:200]}" if said else "no output"
            )
        if self.failing:
            if self.failing >= READER_FAILS_SAID:
                self.down = None
                self.out.append(Connected(self.src.host))
            self.failing = 0
        if header.status == "nofollow":
            self.streaming = False
            raise _Restart()
        if header.status == "unreadable":
            raise UsageError(f"cannot follow {self.src.path} on {self.src.host}: not a readable regular file")
        if header.status == "missing":
            if self.inode is not None:
                self._restart_from_zero("replaced")
            if not self.announced_missing:
                self.announced_missing = True
                self.out.append(FileMissing(self.src.path))
            raise _Restart(self.src.poll_interval)
        if self.inode is not None and header.inode != self.inode:
            # Another file while we were away; the old one's unread tail is out of reach.
            raise self._restart_from_zero("replaced")
        if header.size < self.offset:
            raise self._restart_from_zero("truncated")
        self.inode = header.inode
        self.file = None if header.device is None else (header.device, header.inode)
        self.known_size = header.size
        self.header_age = None if header.age is None else (float(header.age), header.size, time.monotonic())
        if self.pending is not None:
            reason, self.pending = self.pending, None
            # A new file: its end is still to be reached. (Not for every header: each poll and
            # each reconnect reads one, and a file already read to its end is not caught up again.)
            self.at_end = False
            self.out.append(FileRestarted(reason))
        self._caught_up()

    def _caught_up(self) -> None:
        if not self.at_end and self.offset >= self.known_size:
            self._reached_end()
            self.out.append(CaughtUp(self.offset))

    def _reached_end(self) -> None:
        # at the end of the file: quiet from now. On time.monotonic, a C call, once per chunk read: the loop's clock
        # would ask for the running loop, which costs CPython 3.11 a getpid() system call (its fork check)
        self.at_end = True
        self.quiet_since = time.monotonic()

    def _deliver(self, data: bytes) -> None:
        offset, size = self.offset, len(data)
        if len(self.head) == offset < FINGERPRINT:
            self.head += data[: FINGERPRINT - offset]
        # `last_bytes`, inline: a live log's every chunk comes here
        self.last = (self.last + data if size < FINGERPRINT else data)[-FINGERPRINT:]
        end = self.offset = offset + size
        self.unyielded += size
        if self.merge and end >= self.known_size:
            # the end reached: the chunk is its CaughtUp as well (`_caught_up`), one item, not two; at the end
            # (`_reached_end`, inline)
            self.at_end = True
            self.quiet_since = time.monotonic()
            self.out.append(Chunk(offset, data, self.file, None, True))
            return
        self.out.append(Chunk(offset, data, self.file))
        self.at_end = False
        self._caught_up()

    def _lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> Exception:
        if exc is not None or conn.is_closed():
            reason = str(exc or "closed")
            return ConnectionLost(
                f"connection to {self.src.host} lost: {reason}", host=self.src.host, reason=reason
            )
        return _Restart(self.src.poll_interval)

    async def _open_stream(self) -> tuple[asyncssh.SSHClientConnection, CommandOutput]:
        """Start the streaming reader and act on its header (`_accept_header`; the bytes that came with it
        delivered): its connection and session, to read on (`items`); the session is closed here on an error."""
        src = self.src
        args = stream_args(
            src.path,
            self.offset,
            stat_interval=src.stat_interval,
            tail_interval=src.tail_interval,
            previous=self.remote,
        )
        # The pool says what went wrong in our terms (`translate_ssh_errors`): ChannelRefused, ConnectionLost...
        # Its own channel, or the host's multiplexer (`SSHOptions.multiplex`): the same reader script either way.
        conn, session = await src.pool.open_reader(src.host, STREAM_NAME, args, port=src.port, user=src.user)
        self._channel_opened()
        try:
            buffered = errors = b""
            while b"\n" not in buffered:
                kind, data, exc = await session.receive()
                if kind == "err" and len(errors) < _HEADER_LIMIT:
                    errors += data
                if kind == "closed":
                    if exc is not None or conn.is_closed():
                        raise self._lost(conn, exc)
                    _check_refused(src.host, session.exit_status, errors)
                    self._accept_header(None, errors)
                if kind == "out":
                    buffered += data
                    if b"\n" not in buffered and len(buffered) > _HEADER_LIMIT:
                        raise ReaderProtocolError(src.host, buffered[:80])
            line, _, rest = buffered.partition(b"\n")
            header = parse_header(line)
            if header is None:
                raise ReaderProtocolError(src.host, line[:80])
            self._accept_header(header)
            self.rotation = None
            if rest:
                if self.at_end and self._quiet_ended():
                    await self._check_fingerprint()
                self._deliver(rest)
        except BaseException:
            session.close()
            raise
        return conn, session

    def _on_status(self, line: bytes) -> None:
        if b"file truncated" in line:
            raise self._restart_from_zero("truncated")
        if line == b"E":
            raise _Restart(self.src.poll_interval)
        process = parse_process_line(line)
        if process is not None:
            self.remote = process
            return
        stat = parse_stat_line(line)
        if stat is None or stat.inode != self.inode:
            return
        self.known_size = max(self.known_size, stat.size)
        if stat.path_inode is not None and stat.path_inode != stat.inode:
            reason: RestartReason = "rotated" if stat.links > 0 else "replaced"
            previous = self.rotation
            self.rotation = _Rotation(
                size=stat.size,
                reason=reason,
                samples=1 if previous is None else previous.samples + 1,
                quiet=previous is not None and previous.size == stat.size,
            )
            self._check_rotation()

    def _check_rotation(self) -> None:
        # Switch once the old file is read to the size last seen, and it has stopped growing (a
        # writer may finish its last lines there after the rename), or after a grace period.
        rotation = self.rotation
        if (
            rotation is not None
            and self.offset >= rotation.size
            and (rotation.quiet or rotation.samples >= _ROTATION_GRACE_SAMPLES)
        ):
            raise self._restart_from_zero(rotation.reason)

    async def _poll_once(self) -> bool:
        """One read; True when it reached the end (then wait `poll_interval` before the next)."""
        src = self.src
        command = poll_command(src.path, self.offset, max_bytes=DEFAULT_POLL_BYTES)
        result = await src.pool.run(src.host, command, port=src.port, user=src.user, encoding=None)
        self._channel_opened()
        stderr = result.stderr if isinstance(result.stderr, bytes) else b""
        _check_refused(src.host, result.exit_status, stderr)
        stdout = result.stdout
        assert isinstance(stdout, bytes)
        line, newline, data = stdout.partition(b"\n")
        self._accept_header(parse_header(line) if newline else None)
        if data and self.at_end and self._quiet_ended():
            await self._check_fingerprint()
        if data:
            if len(data) < DEFAULT_POLL_BYTES:  # the file ended there: the chunk reaches its end
                self.known_size = max(self.known_size, self.offset + len(data))
            self._deliver(data)
        if len(data) < DEFAULT_POLL_BYTES:
            self.known_size = self.offset
            self._caught_up()
            return True
        return False


REFUSED = 126  # the exit status of a forced-command wrapper that refuses a command (deploy/ssh/)


def _check_refused(host: str, status: int | None, stderr: bytes) -> None:
    """A command the host refused (a forced-command wrapper older than this watchdog, say) is an error
    that says so, not a log that is not there yet: trying again cannot help."""
    if status == REFUSED:
        said = stderr.decode(errors="replace").strip()[:300] or "no message"
        raise TargetError(f"{host} refused the log reader (exit {REFUSED}): {said}", host=host, reason=said)
