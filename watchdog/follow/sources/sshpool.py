"""SSH connections per (host, port, user), shared by every follower and probe of that host.

One connection carries every session channel of its host until the server refuses another (OpenSSH's
MaxSessions, 10 by default, answers "open failed") or `SSHOptions.max_channels` is reached; then the
pool opens another connection to the same host and carries on there. Connections are filled in the
order they were opened, each up to the capacity learned from refusals (a channel counts until the
server confirms its close, as the server counts it until then), and an extra connection is closed
when its last channel closes (after `idle_linger`, so that short commands such as probes on a full
host share one extra connection rather than open one each). A host that refuses a channel even on
a new connection gives `ChannelRefused`, and is not logged in to again for a channel for a while: the
channels asked meanwhile are refused at once (`ChannelRefused`), the pause doubles (with jitter) up to
`REFUSED_SESSIONS_PAUSE_MAX` while the host goes on refusing, and ends when a channel opens.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import structlog
from anyio.lowlevel import RunVar

from watchdog.backoff import backoff
from watchdog.exceptions import ChannelRefused, ConnectionLost
from watchdog.follow.sources.asyncssh_quiet import asyncssh
from watchdog.follow.sources.channel import CommandOutput
from watchdog.follow.sources.hostkeys import HostKeyCheck
from watchdog.follow.sources.keepalive import lazy_keepalive
from watchdog.follow.sources.mux import Multiplexer, MuxFailed, start_mux
from watchdog.follow.sources.packets import direct_packets, quick_awaitable_check, reuse_gcm_keys
from watchdog.follow.sources.readslices import read_in_slices
from watchdog.follow.sources.remote import reader_command
from watchdog.follow.sources.ssherrors import Step, translate_ssh_errors

DEFAULT_CONNECT_TIMEOUT = 10.0
# A dead peer (cable pulled, host frozen) is noticed after interval * count_max seconds.
DEFAULT_KEEPALIVE_INTERVAL = 5.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3
# An extra connection outlives its last channel by this long (longer than the probes' intervals).
DEFAULT_IDLE_LINGER = 10.0

# A host that refuses a session channel even on a new connection (sshd's `MaxSessions 0`) is not logged in to
# again for a channel for this long, doubling (with jitter) up to the maximum while it goes on refusing.
REFUSED_SESSIONS_PAUSE = 1.0
REFUSED_SESSIONS_PAUSE_MAX = 300.0

# Refusals one channel open may meet before it gives up: each one either moves it to a connection
# with room or opens a new one, so only a server that refuses every channel gets this far.
_MAX_REFUSALS = 8
# worker threads that read a connection's files (known_hosts, the SSH config, the identity) at once, in the whole
# event loop (a daemon keeps a pool per host name): a burst of connections (every host at the start, a full host's
# extra connection for each) reuses a thread or two instead of starting one each (each a stack and a malloc
# arena, which the process keeps)
_FILE_THREADS = 2
_file_threads: RunVar[anyio.CapacityLimiter] = RunVar("watchdog_ssh_file_threads")
# The ciphers offered first (the server takes the first of the client's list it also has): AES-GCM costs
# asyncssh about 3 us of CPU a packet where its ChaCha20-Poly1305 costs about 17 (a cipher object for the
# header, the Poly1305 key and the body of each packet), and both are AEAD ciphers OpenSSH enables by default.
# A `Ciphers` line in the SSH config used is honoured instead.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")

# How a server says no to one more session on a connection that is still fine. OpenSSH past its
# MaxSessions answers OPEN_CONNECT_FAILED "open failed"; others use the two more telling codes.
_REFUSALS = frozenset(
    {asyncssh.OPEN_CONNECT_FAILED, asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, asyncssh.OPEN_RESOURCE_SHORTAGE}
)

ConnKey = tuple[str, int | None, str | None]
SessionT = TypeVar("SessionT", bound="asyncssh.SSHClientSession[bytes]")
T = TypeVar("T")

log = structlog.get_logger("watchdog.sshpool")


@dataclass(frozen=True)
class SSHOptions:
    """How to reach hosts: the options of `ssh` that watchdog honours.

    Attributes:
        known_hosts: the known_hosts file to check host keys against (None: ~/.ssh/known_hosts).
        accept_new_host_key: trust an unknown host's key and append it to `known_hosts`
            (OpenSSH's StrictHostKeyChecking=accept-new); a changed key is refused regardless.
        identity: a private key file to offer, after the agent's keys.
        config: OpenSSH client config files to read (Host, HostName, User, Port, IdentityFile,
            ProxyJump...); the empty tuple means ~/.ssh/config if it exists, None means none.
        use_agent: offer the keys of the agent at $SSH_AUTH_SOCK.
        connect_timeout: seconds allowed for one connection attempt.
        keepalive_interval: seconds between keepalive requests on an idle connection.
        keepalive_count_max: unanswered keepalives after which the connection is dropped.
        max_channels: session channels one connection carries before another connection is
            opened; None learns the limit from the server's refusals (sshd's MaxSessions).
        stat_interval: seconds between the looks of a log reader on this host at what the log's path names
            (`SSHSource`); None: the reader's default.
        multiplex: run the host's log readers through one channel (`open_reader`, `watchdog.follow.sources.mux`)
            where python3 is there to run the multiplexer; else one channel each.
    """

    known_hosts: str | None = None
    accept_new_host_key: bool = False
    identity: str | None = None
    config: tuple[str, ...] | None = ()
    use_agent: bool = True
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL
    keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX
    max_channels: int | None = None
    stat_interval: float | None = None
    multiplex: bool = False

    def __post_init__(self) -> None:
        if self.max_channels is not None and self.max_channels < 1:
            raise ValueError("max_channels must be at least 1")
        if self.stat_interval is not None and not self.stat_interval > 0:
            raise ValueError("stat_interval must be positive")

    @property
    def known_hosts_path(self) -> str:
        """The known_hosts file in use."""
        return os.path.expanduser(self.known_hosts or "~/.ssh/known_hosts")


def _where(host: str, port: int | None, user: str | None) -> str:
    user_part = f"{user}@" if user else ""
    port_part = f" port {port}" if port is not None else ""
    return f"{user_part}{host}{port_part}"


def _load_identity(path: str, where: str) -> asyncssh.SSHKey:
    path = os.path.expanduser(path)
    with translate_ssh_errors(where, "identity", detail=path):
        return asyncssh.read_private_key(path)


class _Client(asyncssh.SSHClient):
    """Hands host key decisions to the check that knows the known_hosts policy, and keeps the connection
    once TCP is up (so that a timeout can say how far the attempt got)."""

    def __init__(self, check: HostKeyCheck) -> None:
        self._check = check
        self.conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn
        lazy_keepalive(conn)  # not a timer re-armed at each read of a busy connection
        # not a copy of all that is left of a large read for each of its packets; a log's packets of a read as one
        read_in_slices(conn)
        direct_packets(conn)  # a channel's data packet handed on as soon as it is decrypted
        # an AES-GCM key's schedule made once, not once a packet; a handler's True not put to an ABC check (each
        # done once per process)
        reuse_gcm_keys()
        quick_awaitable_check()

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._check.validate(host, addr, port, key)


@dataclass(eq=False)
class _Conn:
    """One connection of a host, and the session channels it carries now."""

    conn: asyncssh.SSHClientConnection
    # Channel opens handed out so far: numbers them in the order the server answers them.
    opened: int = 0
    # The channels being opened or open (until their close is confirmed), by number: confirmed?
    live: dict[int, bool] = field(default_factory=dict)
    # Refused a channel: no more are sent here until one of its channels closes.
    full: bool = False
    # When its last channel closed (event loop time); None while it carries one.
    idle_since: float | None = None
    # Opened by the pool for a channel (not by `connect`, whose callers may open sessions the pool does not see).
    own: bool = False

    @property
    def channels(self) -> int:
        return len(self.live)


@dataclass(eq=False)
class _Host:
    """The connections to one (host, port, user), in the order they were opened."""

    where: str
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    conns: list[_Conn] = field(default_factory=list)
    # Channels one connection carries before the server refuses one (None: no refusal seen).
    learned: int | None = None
    # A connection was open once (so one opened when none is left is a reconnection), and how many those were.
    was_connected: bool = False
    reconnects: int = 0
    # It refused a channel even on a new connection: this many times in a row, why, and (event loop time) until
    # when no channel is asked of it
    refusing: int = 0
    refusal: str = ""
    refusing_until: float = 0.0
    # its log readers' multiplexer (`open_reader`), while it runs; the connection on which one did not start (one
    # channel per reader there); whether that was said (once a host)
    mux: Multiplexer | None = None
    mux_lock: anyio.Lock = field(default_factory=anyio.Lock)
    mux_failed_on: asyncssh.SSHClientConnection | None = None
    mux_said: bool = False

    def refused_sessions(self, reason: str) -> float:
        """The host refused a session even on a new connection: back off; returns the pause."""
        pause = backoff(self.refusing, first=REFUSED_SESSIONS_PAUSE, cap=REFUSED_SESSIONS_PAUSE_MAX)
        self.refusing += 1
        self.refusal = reason
        self.refusing_until = asyncio.get_running_loop().time() + pause
        if self.refusing == 1:  # once a spell: each further refusal only lengthens the pause
            log.warning("host refuses sessions", host=self.where, reason=reason, next_try_in=round(pause, 1))
        return pause

    def check_refusing(self) -> None:
        """Raise `ChannelRefused` while the host's pause after refusing every session lasts."""
        left = self.refusing_until - asyncio.get_running_loop().time()
        if left > 0:  # no login to be refused again until its pause is over
            raise ChannelRefused(self.where, f"{self.refusal}; not asked again for {left:.0f}s")

    def session_opened(self) -> None:
        """A channel opened: the host takes sessions (again)."""
        if self.refusing:
            log.info("host takes sessions again", host=self.where)
        self.refusing, self.refusal, self.refusing_until = 0, "", 0.0

    def opened(self, conn: asyncssh.SSHClientConnection, *, alone: bool) -> _Conn:
        """Keep a connection just opened; `alone`: no other connection to the host was open (a reconnection
        if one ever was: the earlier ones were lost, as the first one is never closed while it lives)."""
        if alone:
            if self.was_connected:
                self.reconnects += 1
                log.info("SSH connection made again", host=self.where, reconnects=self.reconnects)
            self.was_connected = True
        entry = _Conn(conn)
        self.conns.append(entry)
        return entry

    def live(self) -> list[_Conn]:
        """The open connections (closed ones are closed for good and forgotten here)."""
        for entry in self.conns:
            if entry.conn.is_closed():
                entry.conn.close()
        self.conns = [entry for entry in self.conns if not entry.conn.is_closed()]
        return list(self.conns)


class _Slot:
    """One session channel's place on a connection, from the open request until its close is confirmed."""

    def __init__(self, pool: SSHPool, host: _Host, entry: _Conn, *, fresh: bool = False) -> None:
        self.pool = pool
        self.host = host
        self.entry = entry
        self.fresh = fresh  # the connection was opened for this channel
        self.number = entry.opened
        entry.opened += 1
        entry.live[self.number] = False
        entry.idle_since = None

    def confirm(self) -> None:
        """The channel is open: a connection evidently carries this many at once."""
        self.host.session_opened()
        entry = self.entry
        if self.number in entry.live:
            entry.live[self.number] = True
            if self.host.learned is not None:
                confirmed = sum(entry.live.values())
                self.host.learned = max(self.host.learned, confirmed)

    def refuse(self) -> int:
        """The server refused the channel; returns how many channels it had accepted before it."""
        entry = self.entry
        before = sum(1 for number in entry.live if number < self.number)
        entry.live.pop(self.number, None)
        entry.full = True
        return before

    def release(self) -> None:
        """The channel is closed (or never opened); idempotent."""
        if self.entry.live.pop(self.number, None) is not None:
            self.entry.full = False
            self.pool._released(self.host, self.entry)


class SSHPool:
    """Opens and shares SSH connections; the channels of one host are multiplexed on as few as it allows.

    Use as `async with SSHPool(options) as pool:`; leaving the block closes every connection
    (and with them every remote command still running). See the module docstring for how
    channels are spread over connections.
    """

    def __init__(
        self, options: SSHOptions | None = None, *, idle_linger: float = DEFAULT_IDLE_LINGER
    ) -> None:
        """Remember the options; no connection is made until one is needed.

        Args:
            options: how to reach hosts.
            idle_linger: seconds an extra connection (not a host's first) stays open without
                channels before it is closed, so that short commands (probes, polls) on a full
                host do not open a connection each.
        """
        if idle_linger < 0:
            raise ValueError("idle_linger must not be negative")
        self.options = options or SSHOptions()
        self.idle_linger = idle_linger
        self._hosts: dict[ConnKey, _Host] = {}
        self.muxes_started = 0  # log readers' multiplexers started (`open_reader`), since the pool was made

    async def __aenter__(self) -> SSHPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(
        self, host: str, *, port: int | None = None, user: str | None = None
    ) -> asyncssh.SSHClientConnection:
        """Return the first open connection to `user@host:port`, connecting first if there is none.

        `host` may be an alias from the SSH config; a None port or user comes from the config
        or the defaults. Concurrent callers for the same key share one connection attempt.

        Raises:
            HostKeyError: the host key is unknown or changed (not retried).
            AuthError: authentication was refused (not retried).
            ConnectionLost: the host could not be reached (retry later).
        """
        entry = self._host(host, port, user)
        # Taking the lock also lets the event loop run first, so a connection that has just
        # dropped is seen closed here rather than handed out.
        async with entry.lock:
            live = entry.live()
            if live:
                return live[0].conn
            conn = await self._open(host, port, user)
            entry.opened(conn, alone=True)
            return conn

    async def open_session(
        self,
        host: str,
        factory: Callable[[], SessionT],
        command: str,
        *,
        port: int | None = None,
        user: str | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, SessionT]:
        """Start `command` in a new session channel (bytes in and out) on a connection with room for it.

        The channel counts against its connection until its close is confirmed; the caller closes
        it (through the session's channel) when done.

        Returns:
            The connection that carries the channel, and the session `factory` made.

        Raises:
            ChannelRefused: no connection to the host would open the channel (retry after a pause).
            ConnectionLost: the host could not be reached, or the connection broke (it is forgotten).
            HostKeyError, AuthError: as from `connect`.
        """
        made: list[SessionT] = []

        async def start(conn: asyncssh.SSHClientConnection, slot: _Slot) -> asyncssh.SSHClientConnection:
            def counted() -> SessionT:
                # The caller's session gets every callback; its close also frees the slot. The slot is kept until
                # the server confirms the close, because until then (while the remote command exits) the server
                # still counts the session against its MaxSessions.
                session = factory()
                lost = session.connection_lost

                def connection_lost(exc: Exception | None) -> None:
                    try:
                        lost(exc)
                    finally:
                        slot.release()

                session.connection_lost = connection_lost  # type: ignore[method-assign]
                made.append(session)
                return session

            await conn.create_session(counted, command, encoding=None)
            return conn

        conn = await self._channel(host, port, user, start, hold=True, step="session")
        return conn, made[-1]

    async def open_reader(
        self,
        host: str,
        name: str,
        args: list[str],
        *,
        port: int | None = None,
        user: str | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, CommandOutput]:
        """Start the log reader `name` of `watchdog.follow.sources.remote.READERS` with `args` on the host: through
        the host's multiplexer where `SSHOptions.multiplex` is on and it runs there (started on the host's first
        connection when none runs: python3 on the host), else in a channel of its own (`open_session`).

        Returns:
            The connection that carries it, and its output.

        Raises:
            As `open_session`.
        """
        if self.options.multiplex:
            mux = await self._mux(host, port, user)
            if mux is not None and mux.conn is not None:
                return mux.conn, mux.open(name, args)
        return await self.open_session(host, CommandOutput, reader_command(name, args), port=port, user=user)

    async def _mux(self, host: str, port: int | None, user: str | None) -> Multiplexer | None:
        """The host's running multiplexer, started if none runs; None where it does not start on the host's
        first connection (said once in the log): one channel per reader there."""
        entry = self._host(host, port, user)
        async with entry.mux_lock:
            mux = entry.mux
            if mux is not None and not mux.closed:
                return mux
            entry.mux = None
            first = await self.connect(host, port=port, user=user)
            if entry.mux_failed_on is first:
                return None
            try:
                mux = await start_mux(self, host, port=port, user=user)
            except MuxFailed as exc:
                entry.mux_failed_on = first
                if not entry.mux_said:
                    entry.mux_said = True
                    # a wrapper that refuses it (one older than the daemon: install this release's) is news; a
                    # host without python3 is what it is
                    say = log.warning if exc.refused else log.info
                    say("SSH multiplexer not started: one channel per log", host=entry.where, reason=str(exc))
                return None
            entry.mux = mux
            self.muxes_started += 1
            log.info("log readers through one SSH channel", host=entry.where)
            return mux

    async def run(
        self,
        host: str,
        command: str,
        *,
        port: int | None = None,
        user: str | None = None,
        input: str | bytes | None = None,
        encoding: str | None = "utf-8",
        timeout: float | None = None,  # noqa: ASYNC109 - bounds the command, not the connection
    ) -> asyncssh.SSHCompletedProcess:
        """Run one (already quoted) command on the host over a shared connection; its exit status is the caller's.

        `encoding` None gives bytes in and out.

        Raises:
            ChannelRefused: no connection to the host would open a channel (retry after a pause).
            ConnectionLost: the host could not be reached, or the connection broke (it is discarded).
            HostKeyError, AuthError: as from `connect`.
        """

        async def start(conn: asyncssh.SSHClientConnection, slot: _Slot) -> asyncssh.SSHCompletedProcess:
            with anyio.fail_after(timeout):
                return await conn.run(command, input=input, encoding=encoding, check=False)

        return await self._channel(host, port, user, start, hold=False, step="run")

    def discard(self, conn: asyncssh.SSHClientConnection) -> None:
        """Forget (and close) a connection found broken, so that it is not used again."""
        for entry in self._hosts.values():
            entry.conns = [known for known in entry.conns if known.conn is not conn]
        conn.close()

    @property
    def connected(self) -> bool:
        """Whether a connection of this pool is open now."""
        return any(entry.live() for entry in self._hosts.values())

    @property
    def reconnects(self) -> int:
        """Connections made again to a host after every connection to it was lost (not the first ones, not
        the extra ones opened for more channels), since the pool was made."""
        return sum(entry.reconnects for entry in self._hosts.values())

    def channel_counts(self, host: str, *, port: int | None = None, user: str | None = None) -> list[int]:
        """The session channels each open connection to the host carries now, in the order they were opened."""
        entry = self._hosts.get((host, port, user))
        return [] if entry is None else [known.channels for known in entry.live()]

    def connections(
        self, host: str, *, port: int | None = None, user: str | None = None
    ) -> list[asyncssh.SSHClientConnection]:
        """The open connections to the host, in the order they were opened (the first is `connect`'s)."""
        entry = self._hosts.get((host, port, user))
        return [] if entry is None else [known.conn for known in entry.live()]

    def multiplexed(self, host: str, *, port: int | None = None, user: str | None = None) -> int | None:
        """The log readers running through the host's multiplexer now (None: none runs; see `open_reader`)."""
        entry = self._hosts.get((host, port, user))
        mux = None if entry is None else entry.mux
        return None if mux is None or mux.closed else mux.readers

    def learned_capacity(self, host: str, *, port: int | None = None, user: str | None = None) -> int | None:
        """The channels one connection to the host carries before the server refuses one (None: not seen yet)."""
        entry = self._hosts.get((host, port, user))
        return None if entry is None else entry.learned

    async def aclose(self) -> None:
        """Close every connection and wait (briefly) until they are closed."""
        conns = [known.conn for entry in self._hosts.values() for known in entry.conns]
        self._hosts.clear()
        for conn in conns:
            conn.close()
        with anyio.move_on_after(2, shield=True):
            for conn in conns:
                await conn.wait_closed()

    # -- channels over connections -------------------------------------------------------------------

    def _host(self, host: str, port: int | None, user: str | None) -> _Host:
        key: ConnKey = (host, port, user)
        entry = self._hosts.get(key)
        if entry is None:
            entry = self._hosts[key] = _Host(_where(host, port, user))
        return entry

    def _capacity(self, host: _Host) -> int | None:
        limits = [limit for limit in (self.options.max_channels, host.learned) if limit is not None]
        return min(limits) if limits else None

    def _room(self, host: _Host, tried: set[_Conn]) -> _Conn | None:
        """The first open connection that may carry one more channel."""
        capacity = self._capacity(host)
        for entry in host.live():
            if entry in tried or entry.full:
                continue
            if capacity is None or entry.channels < capacity:
                return entry
        return None

    async def _reserve(self, host: _Host, tried: set[_Conn], key: ConnKey) -> _Slot:
        while True:
            entry = self._room(host, tried)
            if entry is not None:
                return _Slot(self, host, entry)
            async with host.lock:
                # Whoever held the lock may have opened a connection with room for us too, or found that the
                # host refuses every session.
                if self._room(host, tried) is not None:
                    continue
                host.check_refusing()
                live = host.live()
                try:
                    conn = await self._open(*key)
                except ConnectionLost as exc:
                    if not live:
                        raise
                    raise ChannelRefused(
                        host.where,
                        f"its connections ({len(live)}) are full and another could not be opened: {exc}",
                    ) from exc
                entry = host.opened(conn, alone=not live)
                entry.own = True
                if live:
                    refused = any(known.full for known in live) or (
                        host.learned is not None and host.learned == self._capacity(host)
                    )
                    log.info(
                        "opened another SSH connection",
                        host=host.where,
                        reason="refused" if refused else "max_channels",
                        connections=len(host.conns),
                        channels=[known.channels for known in live],
                        capacity=self._capacity(host),
                    )
                return _Slot(self, host, entry, fresh=True)

    async def _channel(
        self,
        host: str,
        port: int | None,
        user: str | None,
        start: Callable[[asyncssh.SSHClientConnection, _Slot], Awaitable[T]],
        *,
        hold: bool,
        step: Step,
    ) -> T:
        """Open a channel with `start` on a connection with room, moving on when one is refused.

        `hold`: the slot stays taken after `start` returns (a session's close frees it); otherwise
        it is freed when `start` returns. `step` says how an error of `start` is translated
        (`translate_ssh_errors`); a connection found closed by then is discarded.
        """
        key: ConnKey = (host, port, user)
        host_entry = self._host(*key)
        tried: set[_Conn] = set()
        # Let the event loop run first, so that a connection that has just dropped is seen closed.
        await anyio.lowlevel.checkpoint()
        host_entry.check_refusing()
        for _ in range(_MAX_REFUSALS):
            slot = await self._reserve(host_entry, tried, key)
            conn = slot.entry.conn
            done = False
            try:
                with translate_ssh_errors(host_entry.where, step, conn=conn, discard=self.discard):
                    try:
                        result = await start(conn, slot)
                        done = True
                    except asyncssh.ChannelOpenError as exc:
                        if conn.is_closed() or exc.code not in _REFUSALS:
                            raise  # translated: the connection is lost, or the channel refused for good
                        before = slot.refuse()
                        tried.add(slot.entry)
                        host_entry.check_refusing()  # another channel found it refuses them all meanwhile
                        if (slot.entry.channels == 0 and slot.fresh) or (slot.number == 0 and slot.entry.own):
                            # A new connection refused the first channel asked of it (sshd counts sessions per
                            # connection: it carried none): more connections will not help.
                            if host_entry.live()[0] is not slot.entry and not slot.entry.channels:
                                self.discard(conn)  # (one that carries others' opens is closed once idle)
                            reason = (
                                f"{exc.reason}, even on a new connection (does the server allow sessions? "
                                "sshd's MaxSessions)"
                            )
                            host_entry.refused_sessions(reason)
                            raise ChannelRefused(host_entry.where, reason) from exc
                        if before:
                            host_entry.learned = max(host_entry.learned or 0, before)
                        elif slot.entry.channels == 0:
                            self._released(host_entry, slot.entry)  # sessions we do not know of fill it
                        continue
            finally:
                if not done or not hold:
                    slot.release()
            slot.confirm()
            return result
        raise ChannelRefused(host_entry.where, f"refused {_MAX_REFUSALS} times in a row on its connections")

    def _released(self, host: _Host, entry: _Conn) -> None:
        """A channel of `entry` is gone: an extra connection left without channels is closed after a while."""
        if entry.channels:
            return
        # Called from asyncssh's channel callbacks: act after they have returned.
        loop = asyncio.get_running_loop()
        entry.idle_since = loop.time()
        loop.call_later(self.idle_linger, self._close_if_idle, host, entry, entry.idle_since)

    def _close_if_idle(self, host: _Host, entry: _Conn, idle_since: float) -> None:
        live = host.live()
        # Busy again meanwhile (and maybe idle again since: then a later call decides).
        if entry.idle_since != idle_since or entry not in live or live[0] is entry:
            return
        host.conns.remove(entry)
        entry.conn.close()
        log.debug("closed an idle extra SSH connection", host=host.where, connections=len(host.conns))

    async def _read_files(self, check: HostKeyCheck, where: str) -> tuple[bool, asyncssh.SSHKey | None]:
        """`_connection_files` in a worker thread, at most `_FILE_THREADS` of the event loop's at once."""
        try:
            limiter = _file_threads.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(_FILE_THREADS)
            _file_threads.set(limiter)
        opts = self.options
        return await anyio.to_thread.run_sync(
            _connection_files, check, opts.config, opts.identity, where, limiter=limiter
        )

    async def _open(self, host: str, port: int | None, user: str | None) -> asyncssh.SSHClientConnection:
        opts = self.options
        where = _where(host, port, user)
        check = HostKeyCheck(opts.known_hosts_path, accept_new=opts.accept_new_host_key)
        # known_hosts, the SSH config and the identity read off the event loop, in one worker-thread call
        ciphers_configured, identity = await self._read_files(check, where)
        clients: list[_Client] = []

        def client() -> _Client:
            clients.append(_Client(check))
            return clients[-1]

        kwargs: dict[str, Any] = {
            "known_hosts": check.trusted_keys,
            "client_factory": client,
            "connect_timeout": opts.connect_timeout,
            "keepalive_interval": opts.keepalive_interval,
            "keepalive_count_max": opts.keepalive_count_max,
        }
        if not ciphers_configured:
            kwargs["encryption_algs"] = _cipher_preference()
        if opts.config is None:
            kwargs["config"] = None
        elif opts.config:
            kwargs["config"] = list(opts.config)
        # else: asyncssh's default, ~/.ssh/config when it exists (an empty list would load nothing)
        if port is not None:
            kwargs["port"] = port
        if user is not None:
            kwargs["username"] = user
        if identity is not None:
            kwargs["client_keys"] = [identity]
        if not opts.use_agent:
            kwargs["agent_path"] = None
        with translate_ssh_errors(where, "connect", detail=lambda: check.problem):
            try:
                with anyio.fail_after(opts.connect_timeout + 5):
                    return await asyncssh.connect(host, **kwargs)
            except TimeoutError as exc:
                why = _timed_out(clients[-1].conn if clients else None, opts.connect_timeout)
                raise ConnectionLost(f"cannot connect to {where}: {why}", host=where, reason=why) from exc


def _connection_files(
    check: HostKeyCheck, config: tuple[str, ...] | None, identity: str | None, where: str
) -> tuple[bool, asyncssh.SSHKey | None]:
    """What a connection attempt reads from files (blocking: in a worker thread): known_hosts (into `check`),
    whether the SSH config sets `Ciphers`, and the identity's key (None: none configured)."""
    check.load()
    return _ciphers_configured(config), (_load_identity(identity, where) if identity is not None else None)


def _timed_out(conn: asyncssh.SSHClientConnection | None, timeout: float) -> str:
    """What a connection attempt that timed out got as far as: no TCP connection (the host is down, or a
    firewall drops the packets), TCP but no SSH banner (not an SSH server, or a hung one), or a handshake
    that did not finish."""
    if conn is None:
        return f"no TCP connection within {timeout:g} s (the host does not answer: down, or packets dropped)"
    if conn.get_extra_info("server_version") is None:
        return (
            f"no SSH banner within {timeout:g} s (the port takes TCP connections, but no SSH server answers)"
        )
    return f"the SSH handshake did not finish within {timeout:g} s"


def _cipher_preference() -> list[str]:
    """asyncssh's default ciphers, `PREFERRED_CIPHERS` first (those of them it has)."""
    default = [alg.decode() for alg in asyncssh.encryption.get_default_encryption_algs()]
    return [
        *(c for c in PREFERRED_CIPHERS if c in default),
        *(c for c in default if c not in PREFERRED_CIPHERS),
    ]


def _ciphers_configured(config: tuple[str, ...] | None) -> bool:
    """Whether the SSH config files used (None: none; empty: ~/.ssh/config) have a `Ciphers` line: blocking,
    call it in a worker thread."""
    if config is None:
        return False
    paths = list(config) or [os.path.expanduser("~/.ssh/config")]
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    words = line.replace("=", " ", 1).split(None, 1)  # "Ciphers x" or "Ciphers=x"
                    if words and words[0].lower() == "ciphers":
                        return True
        except OSError:
            continue
    return False
