"""The daemon's one HTTP server: /metrics, /status, /healthz, /launches/NAME/ready and the status page, on
aiohttp, and its connections: capped, closed when idle, never the last descriptors (docs/contracts.md has the
endpoints; docs/operations.md the Host check, auth, TLS and "Connections"; docs/readiness.md the probe token)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import gzip
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import re
import resource
import secrets
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from anyio.abc import TaskGroup, TaskStatus
from prometheus_client.exposition import choose_encoder, gzip_accepted

from watchdog.core.readiness import readiness_of
from watchdog.core.redaction import redact
from watchdog.core.verdict import Status
from watchdog.daemon.metrics import DaemonStats, exposition
from watchdog.daemon.statuspage import render_page
from watchdog.exceptions import ConfigError
from watchdog.jsontext import orjson_bytes
from watchdog.vocabulary import DEFAULT_LISTEN as _LISTEN
from watchdog.vocabulary import is_loopback, split_listen

log = structlog.get_logger("watchdog.http")

DEFAULT_LISTEN = split_listen(_LISTEN)
SHUTDOWN_TIMEOUT = 2.0  # seconds open requests get to finish when the daemon stops
# /metrics is in the format the scraper's Accept asks for (OpenMetrics for Prometheus, which asks for it first;
# else text 0.0.4, which every version parses), gzipped when its Accept-Encoding allows it, as
# prometheus_client's own exposition does; a cache between the two must keep each variant apart.
_METRICS_VARY = "Accept, Accept-Encoding"
GZIP_LEVEL = 6  # as Go's exporters and Prometheus itself: 2,000 launches (3.2 MB) in 19 ms to 135 KB; level 9 takes 96 ms
_OPEN_PATHS = frozenset({"/healthz"})
_REALM = 'Basic realm="watchdog", charset="UTF-8"'
_BEARER_REFUSED = 'Bearer realm="watchdog", error="invalid_token"'
# The paths a probe token opens (and only these): each launch's readiness.
_PROBE_PATH = re.compile(r"^/launches/[^/]+/ready$")
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

Statuses = Callable[[], list[Status]]
StatusOf = Callable[[str], Status | None]
# launch mode: (launch, "start" or "stop", replace) -> (HTTP status, JSON body); `Daemon.control`
Control = Callable[..., Awaitable[Any]]
Stats = Callable[[], DaemonStats]
Factory = Callable[[], web.RequestHandler]


def status_payload(statuses: list[Status]) -> list[dict[str, Any]]:
    """The /status list: each launch's status as JSON (`Status.to_json`), redacted."""
    return [redact(status.to_json()) for status in statuses]


def _authorized(header: str | None, user: bytes, password: bytes) -> bool:
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    given_user, sep, given_password = decoded.partition(b":")
    # both compared every time, in constant time: a timing tells nothing about either
    user_ok = hmac.compare_digest(given_user, user)
    password_ok = hmac.compare_digest(given_password, password)
    return bool(sep) & user_ok & password_ok


def _basic_auth(user: str, password: str) -> Middleware:
    expected_user, expected_password = user.encode(), password.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in _OPEN_PATHS or _authorized(
            request.headers.get("Authorization"), expected_user, expected_password
        ):
            return await handler(request)
        raise web.HTTPUnauthorized(headers={"WWW-Authenticate": _REALM})

    return check


def _token_matches(given: str, token: bytes) -> bool:
    # digests compared, in constant time: neither the token's bytes nor its length show in the timing
    given_digest = hashlib.sha256(given.encode()).digest()
    return hmac.compare_digest(given_digest, hashlib.sha256(token).digest())


def _probe_token(token: str, check: Middleware) -> Middleware:
    """`check` (basic auth or the Host check), except that on a probe path (`_PROBE_PATH`) a request with
    `Authorization: Bearer TOKEN` is answered when TOKEN is `token`, and refused (401) when it is not. A bearer
    token anywhere else is left to `check`, which does not take it (basic auth refuses it)."""
    expected = token.encode()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not _PROBE_PATH.match(request.path):
            return await check(request, handler)
        # a valid token passes the Host check too: a rebinding page cannot know it
        if _token_matches(given.strip(), expected):
            return await handler(request)
        raise web.HTTPUnauthorized(headers={"WWW-Authenticate": _BEARER_REFUSED})

    return guard


def allowed_host_names(listen_host: str, public_url: str | None = None) -> frozenset[str]:
    """The host names (not addresses: any IP address is allowed) a request's `Host` may give: `localhost`,
    the listen host when it is a name, and the host of `public_url`."""
    names = {"localhost"}
    for host in (listen_host, urlsplit(public_url).hostname if public_url else None):
        if host:
            names.add(host.lower().rstrip("."))
    return frozenset(names)


def host_allowed(header: str | None, names: Iterable[str]) -> bool:
    """Whether a request with this `Host` header is for this server, not a DNS-rebinding page's.

    A rebinding page's origin is a domain name it controls in public DNS, and the browser sends that name as
    `Host`. So these are allowed, with or without a port: an IP address (any: a container's or pod's own
    address, as Kubernetes probes send it), the configured `names`, a name without a dot (a compose service
    or container name, a /etc/hosts alias: public DNS has none) and `*.localhost` (browsers resolve it to
    loopback themselves). No `Host` at all is allowed too: every browser sends one.
    """
    if header is None:
        return True
    host = header.strip().lower()
    if host.startswith("["):  # [IPv6]:port
        address, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return False
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return False
        return True
    name, colon, port = host.partition(":")
    if (colon and not port.isdigit()) or not name:
        return False
    name = name.rstrip(".")
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return name in names or "." not in name or name.endswith(".localhost")
    return True


def _host_check(names: frozenset[str]) -> Middleware:
    said_at = -math.inf
    refused = 0

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        nonlocal said_at, refused
        header = request.headers.get("Host")
        if request.path in _OPEN_PATHS or host_allowed(header, names):
            return await handler(request)
        refused += 1
        now = time.monotonic()
        if now - said_at >= SAY_EVERY:  # once per interval: a rebinding page may ask many times a second
            log.warning("http_host_refused", host=header, refused=refused, allowed=sorted(names))
            said_at, refused = now, 0
        raise web.HTTPMisdirectedRequest(
            text=(
                f"421 Misdirected Request: this server does not answer for the host {header!r}. Reach it by "
                "localhost or an IP address, or set daemon.public_url to the address you use.\n"
            )
        )

    return check


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")


def make_app(
    statuses: Statuses,
    daemon_stats: Stats,
    *,
    basic_auth: tuple[str, str] | None = None,
    host_names: frozenset[str],
    connections: Connections,
    health: Callable[[], str | None] | None = None,
    probe_token: str | None = None,
    status_of: StatusOf | None = None,
    control: Control | None = None,
) -> web.Application:
    """The aiohttp application (routes, auth, headers); `serve_http` runs it.

    Without `basic_auth`, a request whose `Host` is not for this server (`host_allowed` with `host_names`)
    is answered 421, but on /healthz. With it, any `Host` is answered: a rebinding page has no credentials
    for its own origin. With a `probe_token`, /launches/NAME/ready also takes `Authorization: Bearer TOKEN`
    (`_probe_token`). `status_of(name)`: one launch's status, None when there is none (default: looked up in
    `statuses()`). With `control` (launch mode), `POST /launches/NAME/start` and `.../stop` start and stop a
    launch's command (`_control_handler`), with basic auth only: without it they are refused (403).
    """
    check = _basic_auth(*basic_auth) if basic_auth is not None else _host_check(host_names)
    if probe_token is not None:
        check = _probe_token(probe_token, check)
    app = web.Application(middlewares=[connections.middleware(), check])

    def lookup(name: str) -> Status | None:
        return next((s for s in statuses() if s.name == name), None)

    find = status_of if status_of is not None else lookup

    async def healthz(request: web.Request) -> web.Response:
        problem = health() if health is not None else None  # e.g. the state file cannot be written
        return (
            web.Response(text=f"degraded: {problem}\n", status=503) if problem else web.Response(text="ok\n")
        )

    async def metrics(request: web.Request) -> web.Response:
        snapshot, stats = statuses(), daemon_stats()
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        compress = gzip_accepted(request.headers.get("Accept-Encoding", ""))

        def encode() -> bytes:
            body = exposition(encoder, snapshot, stats)
            return gzip.compress(body, compresslevel=GZIP_LEVEL) if compress else body

        body = await anyio.to_thread.run_sync(encode)
        headers = {"Content-Type": content_type, "Vary": _METRICS_VARY}
        if compress:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def status(request: web.Request) -> web.Response:
        snapshot = statuses()
        body = await anyio.to_thread.run_sync(lambda: _dumps(status_payload(snapshot)))
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    async def page(request: web.Request) -> web.Response:
        snapshot = statuses()
        nonce = secrets.token_urlsafe(16)
        html = await anyio.to_thread.run_sync(lambda: render_page(status_payload(snapshot), nonce=nonce))
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return web.Response(text=html, content_type="text/html", headers={"Content-Security-Policy": csp})

    async def ready(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        found = find(name)
        if found is None:
            body = {"name": name, "error": f"no launch named {name!r}: see the names in /status"}
            return web.Response(
                body=_dumps(body), status=404, content_type="application/json", charset="utf-8"
            )
        answer = readiness_of(found)
        # redacted as /status is: a crash's summary is log text
        return web.Response(
            body=_dumps(redact(answer.to_json())),
            status=answer.http_status,
            content_type="application/json",
            charset="utf-8",
        )

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    app.router.add_get("/launches/{name}/ready", ready)  # HEAD too (aiohttp adds it)
    app.router.add_get("/", page)
    if control is not None:
        # starting and killing servers (on other hosts too, with the daemon's SSH keys) is for those who hold
        # the credentials, not for every account that can reach a loopback port
        handler = _control_handler(control, host_names) if basic_auth is not None else _control_refused
        app.router.add_post("/launches/{name}/{action:start|stop}", handler)
    app.on_response_prepare.append(_security_headers)
    return app


async def _control_refused(request: web.Request) -> web.Response:
    # launch mode's start and stop without basic auth: refused, saying how to allow them
    return web.json_response(
        {
            "error": "start and stop over HTTP need basic auth: set [daemon] basic_auth_user and "
            "basic_auth_password (docs/launch-mode.md)"
        },
        status=403,
    )


def _control_handler(control: Control, host_names: frozenset[str]) -> Handler:
    """`POST /launches/NAME/start|stop`, body `{}` or `{"replace": true}` (start). A browser's cross-site form
    cannot send it: the body must be JSON (`Content-Type: application/json`, which a cross-site page can send only
    after a CORS preflight this server never allows), and an `Origin`, when sent, must be this server's."""

    async def handle(request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is not None and not (
            host_allowed(urlsplit(origin).netloc, host_names) or urlsplit(origin).netloc == request.host
        ):
            return web.json_response({"error": "cross-origin requests are refused"}, status=403)
        if request.content_type != "application/json":
            return web.json_response({"error": 'send a JSON body ({} or {"replace": true})'}, status=415)
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("replace", False), bool):
            return web.json_response(
                {"error": 'the body is a JSON object: {} or {"replace": true}'}, status=400
            )
        name, action = request.match_info["name"], request.match_info["action"]
        answer = await control(name, action, replace=body.get("replace", False))
        return web.json_response(answer.body, status=answer.status)

    return handle


def _dumps(payload: object) -> bytes:
    # orjson where it is installed (the `fast` extra): /status of 2,000 launches (3.4 MB) in 2 ms, not 28 ms.
    # What it refuses (a key not a text, an integer past 64 bits) goes to json; a NaN (never in a status: json
    # would refuse it) it writes as null.
    out = orjson_bytes(payload)
    if out is not None:
        return out
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).encode()


async def serve_http(
    listen: tuple[str, int],
    statuses: Statuses,
    daemon_stats: Stats,
    *,
    tls: ssl.SSLContext | None = None,
    basic_auth: tuple[str, str] | None = None,
    public_url: str | None = None,
    max_connections: int = MAX_CONNECTIONS,
    idle_timeout: float = IDLE_TIMEOUT,
    fd_reserve: int | None = None,
    health: Callable[[], str | None] | None = None,
    probe_token: str | None = None,
    status_of: StatusOf | None = None,
    control: Control | None = None,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Bind `listen` (host, port; port 0: a free port), report the bound port with
    `task_status.started(port)`, and serve until cancelled.

    Args:
        statuses: the launches' status snapshots (called on the event loop, per request; redacted and
            encoded in a worker thread, nothing may change them after: `LaunchFollower.status()` makes each).
        daemon_stats: the daemon's counters for /metrics.
        tls: serve HTTPS with this context (see `server_tls`).
        basic_auth: (user, password) required on every path but /healthz.
        public_url: the address people reach the server by; its host is an allowed `Host` (see `make_app`).
        max_connections, idle_timeout, fd_reserve: the connection limits (`Connections`).
        health: what keeps the daemon from doing its job (/healthz answers 503 "degraded: ..."), or None.
        probe_token: the bearer token /launches/NAME/ready takes besides basic auth (docs/readiness.md).
        status_of: one launch's status by name, for /launches/NAME/ready (default: found in `statuses()`).
        control: launch mode's start and stop (`Daemon.control`): `POST /launches/NAME/start|stop`.

    Raises:
        ConfigError: the address cannot be bound (in use, not an address of this machine).
    """
    host, port = listen
    if not is_loopback(host) and (basic_auth is None or tls is None):
        missing = " and ".join(n for n, v in (("basic auth", basic_auth), ("TLS", tls)) if v is None)
        log.warning("http_exposed", listen=f"{host}:{port}", missing=missing)
    connections = Connections(
        tls=tls, max_connections=max_connections, idle_timeout=idle_timeout, fd_reserve=fd_reserve
    )
    app = make_app(
        statuses,
        daemon_stats,
        basic_auth=basic_auth,
        host_names=allowed_host_names(host, public_url),
        connections=connections,
        health=health,
        probe_token=probe_token,
        status_of=status_of,
        control=control,
    )
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT, keepalive_timeout=idle_timeout
    )
    await runner.setup()
    refused = RefusedRequests()
    aiohttp_server = logging.getLogger("aiohttp.server")
    aiohttp_server.addFilter(refused)
    try:
        try:
            sockets = bind(host, port)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(
                "daemon",
                "listen",
                f"cannot listen on {host}:{port}: {reason}; choose another address or port",
            ) from exc
        try:
            bound = sockets[0].getsockname()[1]
            assert runner.server is not None
            async with anyio.create_task_group() as tg:
                await tg.start(connections.serve, runner.server, sockets)
                log.info("http_listening", url=f"{'https' if tls else 'http'}://{_hostport(host, bound)}/")
                task_status.started(bound)
        finally:
            for sock in sockets:
                sock.close()
    finally:
        with anyio.move_on_after(SHUTDOWN_TIMEOUT + 1, shield=True):
            await runner.cleanup()
        aiohttp_server.removeFilter(refused)
        refused.flush()  # the refusals of the last minutes, not said yet, are counted too


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def server_tls(certfile: str, keyfile: str | None = None) -> ssl.SSLContext:
    """A server TLS context from PEM files, built in a worker thread (it reads files and costs tens of ms).

    Raises:
        ConfigError: a file is missing or is not a certificate / key.
    """

    def build() -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "daemon",
                "tls",
                f"cannot load the certificate {certfile!r}: {exc}; give PEM certificate and key files",
            ) from exc
        return context

    return await anyio.to_thread.run_sync(build)


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
