"""HTTP health probe: GET a URL and return its status, through an SSH local forward for a remote host."""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import asyncssh
import httpx

from watchdog.exceptions import ConnectionLost, UsageError
from watchdog.follow.sources.ssherrors import map_tls_error, translate_ssh_errors
from watchdog.follow.sources.sshpool import SSHPool

__all__ = ["DEFAULT_HEALTH_TIMEOUT", "HealthProbe", "HealthURL", "parse_health_url", "tls_context"]

DEFAULT_HEALTH_TIMEOUT = 5.0


@dataclass(frozen=True)
class HealthURL:
    """The parts of a health URL the probe needs."""

    scheme: str
    host: str
    port: int
    target: str


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
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    if any(char in target for char in "\r\n "):
        raise UsageError(f"health URL {url!r}: the path may not contain spaces or line breaks")
    return HealthURL(parts.scheme, parts.hostname, port, target)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every health check, built once (building one costs tens of milliseconds)."""
    return ssl.create_default_context()


class HealthProbe:
    """GETs a health URL and returns the HTTP status code, or None if there was no answer.

    With `host` set the URL is as seen from that host (e.g. http://127.0.0.1:30000/health on
    the GPU machine): its host:port is reached through a local port forward (127.0.0.1:0) on the
    host's shared SSH connection, set up on the first check and again after a reconnect; the request
    still names the URL's host (Host header, and TLS server name and certificate check for https).
    `aclose` (or `async with`) removes the forward.
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
        """Describe the probe; nothing connects until `check`.

        Args:
            url: the health endpoint, http or https.
            pool: the shared SSH connections (required with `host`).
            host: the SSH host the URL is relative to (None: this machine).
            port: SSH port of `host`.
            user: SSH user for `host`.
            timeout: seconds allowed for one check, connection included.
        """
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
        self._listener: asyncssh.SSHListener | None = None
        self._client: httpx.AsyncClient | None = None  # one per probe: a check every 2 s builds none

    async def __aenter__(self) -> HealthProbe:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def aclose(self) -> None:
        """Remove the port forward, if there is one."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._conn = None

    async def check(self) -> int | None:
        """GET the URL once: the status code, or None on no (or no valid) answer.

        Raises:
            HostKeyError, AuthError: the SSH host refuses us; a lost connection is just None.
            TLSError: the TLS handshake of an https URL failed (an untrusted certificate, a plain http
                port...): an answer that says what is wrong, not an absent one.
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
        conn = await self.pool.connect(self.host, port=self.port, user=self.user)
        if conn is not self._conn or self._listener is None:
            await self.aclose()
            forwarded = f"{self.url.host}:{self.url.port}"
            with translate_ssh_errors(
                self.host, "forward", conn=conn, discard=self.pool.discard, detail=forwarded
            ):
                self._listener = await conn.forward_local_port("127.0.0.1", 0, self.url.host, self.url.port)
            self._conn = conn
        return "127.0.0.1", self._listener.get_port()

    async def _get(self, address: str, port: int) -> int | None:
        url = httpx.URL(self.url_text)
        headers = {"Host": url.netloc.decode("ascii"), "User-Agent": "llm-launch-watchdog"}
        if self._client is None:
            verify = await anyio.to_thread.run_sync(tls_context)  # built once, off the event loop
            self._client = httpx.AsyncClient(verify=verify, timeout=self.timeout, trust_env=False)
        try:
            async with (
                self._client.stream(
                    "GET",
                    url.copy_with(host=address, port=port),
                    headers=headers,
                    extensions={"sni_hostname": self.url.host},
                ) as response,
            ):
                return response.status_code  # the body is not read
        except httpx.TransportError as exc:
            cause: BaseException | None = exc  # httpx wraps an ssl error in httpcore's, in its own
            while cause is not None:
                if tls := map_tls_error(cause, self.url_text, host=self.host):
                    raise tls from exc
                cause = cause.__cause__ or cause.__context__
            return None
