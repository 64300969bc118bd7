"""The HTTP server's connections: accepted here, capped, closed when idle, never the last descriptors (the
rules and why: docs/operations.md, "Connections")."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import resource
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from anyio.abc import TaskGroup, TaskStatus

log = structlog.get_logger("watchdog.http")


class RefusedRequests(logging.Filter):
    """aiohttp's server logs each request it cannot parse (bytes that are not HTTP, a header too long, a cut
    request) as an error with its whole traceback: a scan or a fuzzer would fill the log (480 tracebacks, 450
    KB, in one fuzz run). This filter, on aiohttp's server logger, drops those records and says them as one
    line at most every `SAY_EVERY` seconds per kind of refusal (the exception's class: a bounded set), with how
    many of that kind were refused since its last line and the last reason; `flush` says those not said yet
    (at the server's stop), so every refusal is counted once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__("aiohttp.server")
        self._clock = clock
        self._said_at: dict[str, float] = {}  # kind -> when its last line was said
        self._since: dict[str, tuple[int, str]] = {}  # kind -> (refused since its last line, the last reason)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("Error handling request"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        kind = type(exc).__name__ if exc is not None else "other"
        reason = f"{kind}: {exc}" if exc is not None else record.getMessage()
        count = self._since.get(kind, (0, ""))[0] + 1
        self._since[kind] = (count, reason)
        now = self._clock()
        if now - self._said_at.get(kind, -math.inf) >= SAY_EVERY:
            self._say(kind)
            self._said_at[kind] = now
        return False

    def flush(self) -> None:
        """Say the refusals not said yet, one line per kind."""
        for kind in list(self._since):
            self._say(kind)

    def _say(self, kind: str) -> None:
        count, reason = self._since.pop(kind)
        log.warning("http_requests_refused", kind=kind, refused=count, last_error=reason[:200])


MAX_CONNECTIONS = 128  # open HTTP connections at once (Prometheus, browsers and probes need a handful)
IDLE_TIMEOUT = 15.0  # s a connection may stay without a request in progress
FD_RESERVE_MIN = 64  # descriptors HTTP connections never take (at least; else the last eighth of the limit)
SAY_EVERY = 60.0  # s between two log lines about connections closed or refused (or requests refused)
ACCEPT_RETRY = 0.5  # s before accepting again when accept found no descriptor and nothing could be freed
BACKLOG = 128
_ACCEPT_BATCH = 64  # connections accepted per wakeup before letting other tasks run
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\nRetry-After: 1\r\n\r\n"
)

Factory = Callable[[], web.RequestHandler]


@dataclass
class _Conn:
    since: float  # monotonic time it was accepted, or its last request ended
    busy: int = 0  # requests in progress


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening, non-blocking sockets on every address of `host` (port 0: one free port for all of them).

    Raises:
        OSError: the address cannot be resolved or bound.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        seen = set()
        for family, kind, proto, _, resolved in infos:
            if (family, resolved) in seen:
                continue
            seen.add((family, resolved))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            address = resolved
            if port == 0 and len(sockets) > 1:  # the same free port on every address
                address = (resolved[0], sockets[0].getsockname()[1], *resolved[2:])
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Connections:
    """The accept loops, limits and idle close of one HTTP server (docs/operations.md, "Connections")."""

    def __init__(
        self,
        *,
        tls: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        fd_reserve: int | None = None,
    ) -> None:
        """`fd_reserve`: descriptors never used for a connection (default: the last eighth of the soft
        RLIMIT_NOFILE, at least `FD_RESERVE_MIN`); 0 turns the reserve off."""
        if max_connections < 1 or idle_timeout <= 0:
            raise ValueError("max_connections must be at least 1 and idle_timeout positive")
        self._tls = tls
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self._fd_reserve = fd_reserve
        self._open: dict[web.RequestHandler, _Conn] = {}
        self._attaching = 0  # accepted, the protocol (and TLS handshake) not made yet
        self._shed: Counter[str] = Counter()  # what was done since the last log line
        self._reason = ""
        self._said_at = -math.inf

    @property
    def open(self) -> int:
        """Connections open now (accepted ones still in their TLS handshake included)."""
        self._prune()
        return len(self._open) + self._attaching

    def middleware(self) -> Middleware:
        """Marks a connection busy while one of its requests is handled (busy ones are never closed)."""

        @web.middleware
        async def track(request: web.Request, handler: Handler) -> web.StreamResponse:
            conn = self._open.get(request.protocol)
            if conn is None:
                return await handler(request)
            conn.busy += 1
            try:
                return await handler(request)
            finally:
                conn.busy -= 1
                conn.since = time.monotonic()

        return track

    async def serve(
        self,
        factory: Factory,
        sockets: list[socket.socket],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on `sockets` and hand each admitted connection to `factory`'s protocol, until cancelled."""
        async with anyio.create_task_group() as tg:
            for sock in sockets:
                tg.start_soon(self._accept, sock, factory, tg)
            tg.start_soon(self._sweep)
            task_status.started()

    # -- accepting -------------------------------------------------------------------------------------------

    async def _accept(self, sock: socket.socket, factory: Factory, tg: TaskGroup) -> None:
        while True:
            await anyio.wait_readable(sock)
            for _ in range(_ACCEPT_BATCH):
                try:
                    conn, _ = sock.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    break
                except OSError as exc:
                    # out of descriptors (or another accept failure): the connection waits in the backlog
                    self._note("accept_failed", exc.strerror or str(exc))
                    if exc.errno not in _OUT_OF_DESCRIPTORS or not self._close_idlest():
                        await anyio.sleep(ACCEPT_RETRY)
                    break
                self._admit(conn, factory, tg)
            await anyio.lowlevel.checkpoint()

    def _admit(self, conn: socket.socket, factory: Factory, tg: TaskGroup) -> None:
        conn.setblocking(False)
        line = self._fd_line()
        reason = ""
        if self.open >= self.max_connections:
            reason = f"{self.max_connections} connections open (the most allowed)"
        elif line is not None and conn.fileno() >= line:
            reason = f"file descriptors near the limit (RLIMIT_NOFILE {line + self._reserve()})"
        if reason:
            if self._close_idlest():
                self._note("closed_idle", reason)
            else:
                self._note("refused", reason)
                self._refuse(conn)
                return
        self._attaching += 1
        tg.start_soon(self._attach, conn, factory)

    async def _attach(self, conn: socket.socket, factory: Factory) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.connect_accepted_socket(
                factory,
                conn,
                ssl=self._tls,
                ssl_handshake_timeout=self.idle_timeout if self._tls is not None else None,
            )
        except OSError as exc:  # a failed TLS handshake, a reset: the transport is closed already
            log.debug("http_connection_failed", error=str(exc))
            conn.close()
            return
        finally:
            self._attaching -= 1
        self._open[protocol] = _Conn(since=time.monotonic())

    def _refuse(self, conn: socket.socket) -> None:
        if self._tls is None:  # a plain-text answer would be noise inside TLS
            with contextlib.suppress(OSError):
                conn.send(_BUSY)
        conn.close()

    # -- limits ----------------------------------------------------------------------------------------------

    def _reserve(self) -> int:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if self._fd_reserve is not None:
            return self._fd_reserve
        return max(FD_RESERVE_MIN, soft // 8)

    def _fd_line(self) -> int | None:
        # the lowest descriptor number a connection may not have; None: no limit to keep off
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or self._fd_reserve == 0:
            return None
        return soft - self._reserve()

    def _prune(self) -> None:
        gone = [h for h in self._open if h.transport is None]
        for handler in gone:
            del self._open[handler]

    def _close_idlest(self) -> bool:
        self._prune()
        idle = [(c.since, id(h), h) for h, c in self._open.items() if not c.busy]
        if not idle:
            return False
        _, _, handler = min(idle)
        del self._open[handler]
        handler.force_close()
        return True

    async def _sweep(self) -> None:
        period = min(1.0, self.idle_timeout / 4)
        while True:
            await anyio.sleep(period)
            self._prune()
            now = time.monotonic()
            for handler, conn in list(self._open.items()):
                if not conn.busy and now - conn.since >= self.idle_timeout:
                    del self._open[handler]
                    handler.force_close()
            self._say(now)

    # -- saying it, once per interval ------------------------------------------------------------------------

    def _note(self, what: str, reason: str) -> None:
        self._shed[what] += 1
        self._reason = reason
        self._say(time.monotonic())

    def _say(self, now: float) -> None:
        if not self._shed or now - self._said_at < SAY_EVERY:
            return
        window = "" if math.isinf(self._said_at) else f"{now - self._said_at:.0f}s"
        log.warning(
            "http_connections_over_limit",
            reason=self._reason,
            closed_idle=self._shed["closed_idle"],
            refused=self._shed["refused"],
            accept_failed=self._shed["accept_failed"],
            open=self.open,
            since_last=window or None,
            next_report_in=f"{SAY_EVERY:g}s",
        )
        self._shed.clear()
        self._said_at = now
