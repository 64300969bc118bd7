"""The daemon's one HTTP server: /metrics, /status, /healthz and the status page, on aiohttp
(docs/contracts.md has the endpoints; docs/operations.md the Host check, auth and TLS)."""

from __future__ import annotations

import base64
import binascii
import gzip
import hmac
import ipaddress
import json
import logging
import math
import secrets
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from anyio.abc import TaskStatus
from prometheus_client.exposition import choose_encoder, gzip_accepted

from watchdog.core.redaction import redact
from watchdog.core.verdict import Status
from watchdog.daemon.connections import (
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    SAY_EVERY,
    Connections,
    RefusedRequests,
    bind,
)
from watchdog.daemon.metrics import DaemonStats, registry_for
from watchdog.daemon.statuspage import render_page
from watchdog.exceptions import ConfigError
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

Statuses = Callable[[], list[Status]]
Stats = Callable[[], DaemonStats]


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
) -> web.Application:
    """The aiohttp application (routes, auth, headers); `serve_http` runs it.

    Without `basic_auth`, a request whose `Host` is not for this server (`host_allowed` with `host_names`)
    is answered 421, but on /healthz. With it, any `Host` is answered: a rebinding page has no credentials
    for its own origin.
    """
    check = _basic_auth(*basic_auth) if basic_auth is not None else _host_check(host_names)
    app = web.Application(middlewares=[connections.middleware(), check])

    async def healthz(request: web.Request) -> web.Response:
        problem = health() if health is not None else None  # e.g. the state file cannot be written
        return (
            web.Response(text=f"degraded: {problem}\n", status=503) if problem else web.Response(text="ok\n")
        )

    async def metrics(request: web.Request) -> web.Response:
        snapshot, stats = statuses(), daemon_stats()
        registry = registry_for(lambda: snapshot, lambda: stats)
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        compress = gzip_accepted(request.headers.get("Accept-Encoding", ""))

        def encode() -> bytes:
            body = encoder(registry)
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

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    app.router.add_get("/", page)
    app.on_response_prepare.append(_security_headers)
    return app


def _dumps(payload: object) -> bytes:
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
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Bind `listen` (port 0: a free port), report the bound port with `task_status.started(port)`, and serve
    until cancelled.

    Args:
        listen: (host, port); `DEFAULT_LISTEN` is 127.0.0.1:9469.
        statuses: the launches' status snapshots (called on the event loop, per request; redacted and
            encoded in a worker thread, nothing may change them after: `LaunchFollower.status()` makes each).
        daemon_stats: the daemon's counters for /metrics.
        tls: serve HTTPS with this context (see `server_tls`).
        basic_auth: (user, password) required on every path but /healthz.
        public_url: the address people reach the server by; its host is an allowed `Host` (see `make_app`).
        max_connections, idle_timeout, fd_reserve: the connection limits (`watchdog.daemon.connections`).
        health: what keeps the daemon from doing its job (/healthz answers 503 "degraded: ..."), or None.

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
