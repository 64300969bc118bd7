"""The one place where asyncssh and OS errors of SSH become watchdog's (`watchdog.exceptions`).

In the style of httpx's `map_httpcore_exceptions`: the SSH pool, the SSH source and the probes run their
asyncssh calls inside `translate_ssh_errors(where, step)` (an HTTP request's errors are said by
`watchdog.httpclient`), and what comes out is either one of our errors or an error that is none of these (a
bug: it passes through). What each error means depends on the step it broke:

| error                                   | step          | becomes                                      |
|-----------------------------------------|---------------|----------------------------------------------|
| asyncssh.ConfigParseError               | any           | SSHConfigError (a ConfigError: exit 78)      |
| OSError, Key(Encryption|Import)Error    | identity      | AuthError: the identity file is unusable     |
| asyncssh.HostKeyNotVerifiable           | connect       | HostKeyError                                 |
| asyncssh.PermissionDenied               | connect       | AuthError                                    |
| OSError, asyncssh.Error, TimeoutError   | connect       | ConnectionLost "cannot connect to"           |
| any of those, the connection closed     | session, run  | ConnectionLost "connection to ... lost"      |
| asyncssh.ChannelOpenError               | session, run  | ChannelRefused                               |
| OSError, asyncssh.Error                 | session       | ChannelRefused (the connection is fine)      |
| OSError, asyncssh.Error, TimeoutError   | run           | ConnectionLost "running a command failed"    |
| OSError, asyncssh.Error                 | forward       | ConnectionLost "cannot forward to"           |

A connection found closed when its error arrives is handed to `discard`, so that it is not used again.
Our own errors pass through untouched. The permanent ones (host key, authentication, SSH config) are all a
`PermanentError`; the transient ones a `ConnectionLost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from watchdog.exceptions import (
    AuthError,
    ChannelRefused,
    ConnectionLost,
    HostKeyError,
    SSHConfigError,
    WatchdogError,
)
from watchdog.follow.sources.asyncssh_quiet import asyncssh

Step = Literal["identity", "connect", "session", "run", "forward"]

# What an SSH call may raise besides our own errors (TimeoutError is an OSError, named for clarity).
_SSH_ERRORS = (OSError, asyncssh.Error, TimeoutError)


def map_ssh_error(
    exc: BaseException, where: str, step: Step, *, closed: bool = False, detail: str | None = None
) -> WatchdogError | None:
    """The watchdog error for `exc`, raised by asyncssh (or the OS under it) at `step` for host `where`.

    Args:
        exc: what was raised.
        where: the host, as `[user@]host[ port N]`.
        step: what was being done (see the module docstring).
        closed: the connection the step ran on is closed now.
        detail: the identity file (`identity`), the host key check's own account (`connect`), the forwarded
            address (`forward`).

    Returns:
        Our error (raise it `from exc`), or None for an error that is not an SSH one (let it through).
    """
    if isinstance(exc, WatchdogError):
        return None
    if isinstance(exc, asyncssh.ConfigParseError):
        return SSHConfigError(str(exc), host=where)
    if step == "identity":
        return _identity_error(exc, where, detail or "?")
    if step == "connect":
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            return HostKeyError(
                detail or f"host key of {where} could not be verified: {exc}", host=where, reason=str(exc)
            )
        if isinstance(exc, asyncssh.PermissionDenied):
            return AuthError(
                f"authentication to {where} was refused ({exc.reason}); check the user name, "
                "the identity file or agent keys, and the remote authorized_keys",
                host=where,
                reason=exc.reason,
            )
        if isinstance(exc, _SSH_ERRORS):
            return ConnectionLost(f"cannot connect to {where}: {exc}", host=where, reason=str(exc))
        return None
    if not isinstance(exc, _SSH_ERRORS):
        return None
    if step == "forward":
        return ConnectionLost(f"cannot forward to {detail}: {exc}", host=where, reason=str(exc))
    if closed:
        return ConnectionLost(f"connection to {where} lost: {exc}", host=where, reason=str(exc))
    if isinstance(exc, asyncssh.ChannelOpenError):
        return ChannelRefused(where, exc.reason)
    if step == "session":
        return ChannelRefused(where, str(exc))
    return ConnectionLost(f"running a command on {where} failed: {exc}", host=where, reason=str(exc))


def _identity_error(exc: BaseException, where: str, path: str) -> WatchdogError | None:
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return AuthError(
            f"identity file {path} for {where} cannot be read: {exc.strerror}", host=where, reason=reason
        )
    if isinstance(exc, asyncssh.KeyEncryptionError):
        return AuthError(
            f"identity file {path} for {where} is protected by a passphrase: add it to the agent instead",
            host=where,
            reason="protected by a passphrase",
        )
    if isinstance(exc, asyncssh.KeyImportError):
        return AuthError(
            f"identity file {path} for {where} is not a private key: {exc}", host=where, reason=str(exc)
        )
    return None


@contextmanager
def translate_ssh_errors(
    where: str,
    step: Step,
    *,
    conn: asyncssh.SSHClientConnection | None = None,
    discard: Callable[[asyncssh.SSHClientConnection], None] | None = None,
    detail: str | Callable[[], str | None] | None = None,
) -> Iterator[None]:
    """Raise what the block raises as our error (`map_ssh_error`); `conn` closed by then goes to `discard`.

    `detail` may be a function, asked only once an error came (the host key check's account, which the
    connection attempt itself writes).
    """
    try:
        yield
    except BaseException as exc:
        closed = conn is not None and conn.is_closed()
        said = detail() if callable(detail) else detail
        mapped = map_ssh_error(exc, where, step, closed=closed, detail=said)
        if mapped is None:
            raise
        if closed and discard is not None and conn is not None:
            discard(conn)
        raise mapped from exc
