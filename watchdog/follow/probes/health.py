"""HTTP health probe: GET a URL and return its status, through an SSH local forward for a remote host."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup, TaskStatus

from watchdog.exceptions import ConnectionLost, TLSError, UsageError
from watchdog.follow.sources.asyncssh_quiet import asyncssh
from watchdog.follow.sources.sshpool import SSHPool
from watchdog.httpclient import create_session, tls_problem

DEFAULT_HEALTH_TIMEOUT = 5.0
_CHUNK = 65536


@dataclass(frozen=True)
class HealthURL:
    """The parts of a health URL the probe needs."""

    host: str
    port: int


def parse_health_url(url: str) -> HealthURL:
    """Parse an http(s) URL; `UsageError` if it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"health URL {url!r}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"health URL {url!r}: expected http://host[:port]/path or https://...")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if any(char in parts.path + parts.query for char in "\r\n "):
        raise UsageError(f"health URL {url!r}: the path may not contain spaces or line breaks")
    return HealthURL(parts.hostname, port)


class HealthProbe:
    """GETs a health URL and returns the HTTP status code, or None if there was no answer.

    With `host` set the URL is as seen from that host (http://127.0.0.1:30000/health on the GPU machine),
    reached through a local port forward on the host's shared SSH connection (made again after a reconnect,
    removed by `aclose` or `async with`); the request still names the URL's host (Host header, TLS name).
    """

    def __init__(
        self,
        url: str,
        *,
        pool: SSHPool | None = None,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        timeout: float = DEFAULT_HEALTH_TIMEOUT,
    ) -> None:
        """Describe the probe; nothing connects until `check`. `pool` is needed with `host` (None: this
        machine); `timeout` bounds one check, connection included."""
        if host is not None and pool is None:
            raise ValueError("a remote health probe needs the SSH pool")
        self.url = parse_health_url(url)
        self.url_text = url
        self.pool = pool
        self.host = host
        self.port = port
        self.user = user
        self.timeout = timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self._forward: tuple[anyio.CancelScope, int] | None = None  # its scope, its local port
        self._client: aiohttp.ClientSession | None = None  # one per probe: a check every 2 s builds none
        self._stack = contextlib.AsyncExitStack()
        self._tg: TaskGroup | None = None  # the forward's tasks, within `async with`

    async def __aenter__(self) -> HealthProbe:
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            if self._client is not None:
                await self._client.close()
                self._client = None
        finally:
            await self.aclose()
            tg, self._tg = self._tg, None
            if tg is not None:
                # Every forwarded connection ends here, its socket and channel closed, none left behind.
                # The block's own exception (if any) is not the task group's: it goes on unwrapped.
                tg.cancel_scope.cancel()
                await self._stack.aclose()

    async def aclose(self) -> None:
        """Remove the port forward, if there is one (its listener and connections close)."""
        if self._forward is not None:
            self._forward[0].cancel()
            self._forward = None
        self._conn = None

    async def check(self) -> int | None:
        """GET the URL once: the status code, or None on no (or no valid) answer.

        Raises:
            HostKeyError, AuthError: the SSH host refuses us; a lost connection is just None.
            TLSError: the TLS handshake of an https URL failed: an answer that says what is wrong.
        """
        try:
            with anyio.fail_after(self.timeout):
                address, port = await self._address()
                return await self._get(address, port)
        except (OSError, TimeoutError, ConnectionLost, asyncssh.Error):
            return None

    async def _address(self) -> tuple[str, int]:
        if self.host is None:
            return self.url.host, self.url.port
        assert self.pool is not None
        if self._tg is None:
            raise RuntimeError("a remote health probe forwards within `async with HealthProbe(...)`")
        conn = await self.pool.connect(self.host, port=self.port, user=self.user)
        if conn is not self._conn or self._forward is None:
            await self.aclose()
            self._forward = await self._tg.start(self._serve_forward, conn)
            self._conn = conn
        return "127.0.0.1", self._forward[1]

    async def _serve_forward(
        self, conn: asyncssh.SSHClientConnection, *, task_status: TaskStatus[tuple[anyio.CancelScope, int]]
    ) -> None:
        """The local forward: a listener on 127.0.0.1:0, each connection to it piped through a channel of
        `conn` to the URL's host:port, until `aclose` cancels it. Ours rather than asyncssh's
        `forward_local_port`, which leaves a connection it accepted open (for the garbage collector) when the
        SSH connection closes while its channel is being opened."""
        with anyio.CancelScope() as scope:
            async with await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as listener:
                task_status.started((scope, listener.extra(SocketAttribute.local_port)))  # noqa: S610
                await listener.serve(functools.partial(self._pipe, conn))

    async def _pipe(self, conn: asyncssh.SSHClientConnection, client: SocketStream) -> None:
        """One forwarded connection: bytes both ways until the remote end closes (or the client, then the
        remote's answer is still passed on). However it ends (a refused channel, a lost connection) it
        only closes, and the check that made it sees no answer."""
        async with client:
            try:
                reader, writer = await conn.open_connection(self.url.host, self.url.port)
            except (OSError, asyncssh.Error):
                return
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_to_remote, client, writer)
                    while data := await reader.read(_CHUNK):
                        await client.send(data)
                    tg.cancel_scope.cancel()  # the remote end is done: so is this connection
            except Exception:  # noqa: S110 - a connection that breaks just ends; see the docstring
                pass
            finally:
                writer.close()

    async def _get(self, address: str, port: int) -> int | None:
        # the request goes to address:port but names the URL's host (Host header, TLS server name and check)
        parts = urlsplit(self.url_text)
        headers = {"Host": parts.netloc.rpartition("@")[2], "User-Agent": "llm-launch-watchdog"}
        url = parts._replace(netloc=f"[{address}]:{port}" if ":" in address else f"{address}:{port}").geturl()
        if self._client is None:
            self._client = await create_session(self.timeout, trust_env=False)
        try:
            async with self._client.get(
                url, headers=headers, allow_redirects=False, server_hostname=self.url.host
            ) as response:
                return response.status  # the body is not read
        except aiohttp.ClientError as exc:
            if (problem := tls_problem(exc)) is not None:
                raise TLSError(self.url_text, problem, host=self.host) from exc
            return None


async def _to_remote(client: SocketStream, writer: asyncssh.SSHWriter[bytes]) -> None:
    """The client's bytes to the remote end; its end of file as the channel's (the answer still comes)."""
    async for data in client:
        writer.write(data)
        await writer.drain()
    writer.write_eof()
