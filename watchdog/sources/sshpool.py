"""One SSH connection per (host, port, user), shared by every follower and probe of that host."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import asyncssh

from watchdog.exceptions import AuthError, ConnectionLost, HostKeyError
from watchdog.sources.hostkeys import HostKeyCheck

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_KEEPALIVE_COUNT_MAX",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "ConnKey",
    "SSHOptions",
    "SSHPool",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
# A dead peer (cable pulled, host frozen) is noticed after interval * count_max seconds.
DEFAULT_KEEPALIVE_INTERVAL = 5.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3

ConnKey = tuple[str, int | None, str | None]


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
    """

    known_hosts: str | None = None
    accept_new_host_key: bool = False
    identity: str | None = None
    config: tuple[str, ...] | None = ()
    use_agent: bool = True
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL
    keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX

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
    try:
        return asyncssh.read_private_key(path)
    except OSError as exc:
        raise AuthError(f"identity file {path} for {where} cannot be read: {exc.strerror}") from exc
    except asyncssh.KeyEncryptionError as exc:
        raise AuthError(
            f"identity file {path} for {where} is protected by a passphrase: add it to the agent instead"
        ) from exc
    except asyncssh.KeyImportError as exc:
        raise AuthError(f"identity file {path} for {where} is not a private key: {exc}") from exc


class _Client(asyncssh.SSHClient):
    """Hands host key decisions to the check that knows the known_hosts policy."""

    def __init__(self, check: HostKeyCheck) -> None:
        self._check = check

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._check.validate(host, addr, port, key)


class SSHPool:
    """Opens and shares SSH connections; channels of one host are multiplexed on one connection.

    Use as `async with SSHPool(options) as pool:`; leaving the block closes every connection
    (and with them every remote command still running).
    """

    def __init__(self, options: SSHOptions | None = None) -> None:
        """Remember the options; no connection is made until `connect`."""
        self.options = options or SSHOptions()
        self._conns: dict[ConnKey, asyncssh.SSHClientConnection] = {}
        self._locks: dict[ConnKey, anyio.Lock] = {}

    async def __aenter__(self) -> SSHPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(
        self, host: str, *, port: int | None = None, user: str | None = None
    ) -> asyncssh.SSHClientConnection:
        """Return the open connection to `user@host:port`, connecting first if there is none.

        `host` may be an alias from the SSH config; a None port or user comes from the config
        or the defaults. Concurrent callers for the same key share one connection attempt.

        Raises:
            HostKeyError: the host key is unknown or changed (not retried).
            AuthError: authentication was refused (not retried).
            ConnectionLost: the host could not be reached (retry later).
        """
        key: ConnKey = (host, port, user)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            conn = self._conns.get(key)
            if conn is not None and not conn.is_closed():
                return conn
            conn = await self._open(host, port, user)
            self._conns[key] = conn
            return conn

    async def run(
        self,
        host: str,
        command: str,
        *,
        port: int | None = None,
        user: str | None = None,
        input: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - bounds the command, not the connection
    ) -> asyncssh.SSHCompletedProcess:
        """Run one (already quoted) command on the host over the shared connection; its exit status is the caller's.

        Raises:
            ConnectionLost: the host could not be reached, or the connection broke (it is discarded).
            HostKeyError, AuthError: as from `connect`.
        """
        conn = await self.connect(host, port=port, user=user)
        try:
            with anyio.fail_after(timeout):
                return await conn.run(command, input=input, check=False)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            if conn.is_closed():
                self.discard(conn)
            raise ConnectionLost(f"running a probe on {_where(host, port, user)} failed: {exc}") from exc

    def discard(self, conn: asyncssh.SSHClientConnection) -> None:
        """Forget (and close) a connection found broken, so the next `connect` makes a new one."""
        for key, known in list(self._conns.items()):
            if known is conn:
                del self._conns[key]
        conn.close()

    @property
    def connected(self) -> bool:
        """Whether a connection of this pool is open now."""
        return any(not conn.is_closed() for conn in self._conns.values())

    async def aclose(self) -> None:
        """Close every connection and wait (briefly) until they are closed."""
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        with anyio.move_on_after(2, shield=True):
            for conn in conns:
                await conn.wait_closed()

    async def _open(self, host: str, port: int | None, user: str | None) -> asyncssh.SSHClientConnection:
        opts = self.options
        where = _where(host, port, user)
        check = HostKeyCheck(opts.known_hosts_path, accept_new=opts.accept_new_host_key)
        kwargs: dict[str, Any] = {
            "known_hosts": check.trusted_keys,
            "client_factory": lambda: _Client(check),
            "connect_timeout": opts.connect_timeout,
            "keepalive_interval": opts.keepalive_interval,
            "keepalive_count_max": opts.keepalive_count_max,
        }
        if opts.config is None:
            kwargs["config"] = None
        elif opts.config:
            kwargs["config"] = list(opts.config)
        # else: asyncssh's default, ~/.ssh/config when it exists (an empty list would load nothing)
        if port is not None:
            kwargs["port"] = port
        if user is not None:
            kwargs["username"] = user
        if opts.identity is not None:
            kwargs["client_keys"] = [await anyio.to_thread.run_sync(_load_identity, opts.identity, where)]
        if not opts.use_agent:
            kwargs["agent_path"] = None
        try:
            with anyio.fail_after(opts.connect_timeout + 5):
                return await asyncssh.connect(host, **kwargs)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyError(check.problem or f"host key of {where} could not be verified: {exc}") from exc
        except asyncssh.PermissionDenied as exc:
            raise AuthError(
                f"authentication to {where} was refused ({exc.reason}); check the user name, "
                "the identity file or agent keys, and the remote authorized_keys"
            ) from exc
        except asyncssh.ConfigParseError as exc:
            raise AuthError(f"the SSH config for {where} cannot be read: {exc}") from exc
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise ConnectionLost(f"cannot connect to {where}: {exc}") from exc
