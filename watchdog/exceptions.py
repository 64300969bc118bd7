"""The exception tree of watchdog: every error the package raises on purpose.

```
WatchdogError
├── UsageError                 bad command line or unreadable input file (exit 64)           file
│   └── StartFailed            a launch's command could not be started on its host           host, status
├── ConfigError                a config or profile file is invalid (exit 78)                 path, key, problem
│   ├── ConfigRuleError        a rule of the whole config broke at a key (path "config")     key, problem
│   └── SSHConfigError         the SSH config cannot be parsed                    [permanent] host, reason
├── TargetError                the target cannot be reached (exit 69)                        host, reason
│   ├── HostKeyError           unknown or changed host key: alert, do not retry   [permanent]
│   ├── AuthError              authentication failed: alert, do not retry         [permanent]
│   ├── ConnectionLost         transient: the connection dropped or could not be made (refused, timed
│   │   │                      out, reset, no SSH banner): retry
│   │   └── ChannelRefused     reachable, but no connection opens another session: retry after a pause
│   ├── ReaderProtocolError    the remote log reader answered, but not in its protocol    host, output
│   └── TLSError               the TLS handshake with a health URL failed                 url, reason
├── DeliveryError              a notification could not be delivered                      receiver, status
│   └── TransientDeliveryError a network error, a timeout, a 5xx or a 429: retry later    retry_after
├── InvalidShard (ValueError)  a shard spec or count is wrong (the CLI: exit 64)          text, problem
└── PermanentError             [permanent]: a mixin of HostKeyError, AuthError and SSHConfigError
```

A `PermanentError` (the host refuses us, or our SSH config is broken) is said once and waits for a person; a
`ConnectionLost` is retried: these class names are a contract between the follower and the daemon. Each
exception carries the fields of its message (the right column; a subclass has its parent's too). SSH errors
are translated into this tree in `watchdog.follow.sources.ssherrors`, HTTP ones in `watchdog.httpclient`.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ChannelRefused",
    "ConfigError",
    "ConfigRuleError",
    "ConnectionLost",
    "DeliveryError",
    "HostKeyError",
    "InvalidShard",
    "PermanentError",
    "ReaderProtocolError",
    "SSHConfigError",
    "StartFailed",
    "TLSError",
    "TargetError",
    "TransientDeliveryError",
    "UsageError",
    "WatchdogError",
    "first_watchdog_error",
    "reason_of",
]


class WatchdogError(Exception):
    """Root of every error watchdog raises on purpose."""


class UsageError(WatchdogError):
    """The command line is wrong, or an input file (`file`, when one is at fault) cannot be read (exit 64)."""

    def __init__(self, message: str, *, file: str | None = None) -> None:
        self.file = file
        super().__init__(message)


class StartFailed(UsageError):
    """A launch's command could not be started at `host` (None: this machine): not found there, or its working
    directory, log or pid file cannot be used; nothing runs. `status`: the start script's exit status (127: the
    command is not found)."""

    def __init__(self, message: str, *, host: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.host = host
        self.status = status


class ConfigError(WatchdogError):
    """A configuration or profile file is invalid (exit 78): the message names file, key and problem."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")


class ConfigRuleError(ConfigError):
    """A rule of the whole config broke at `key`; the config parser puts the file's name on it."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__("config", key, problem)


class TargetError(WatchdogError):
    """The watched target cannot be reached (exit 69): at `host` (`[user@]host[ port N]`, when known),
    `reason`; the message is `message` when given, else "host: reason"."""

    def __init__(
        self, message: str | None = None, *, host: str | None = None, reason: str | None = None
    ) -> None:
        self.host = host
        self.reason = reason
        if message is None:
            message = f"{host}: {reason}" if host else str(reason)
        super().__init__(message)


class PermanentError(WatchdogError):
    """A failure that retrying will not fix until a person does (a mixin): the host key is unknown or changed,
    authentication is refused, the SSH config cannot be parsed. Said once; the daemon backs off per host."""


class HostKeyError(TargetError, PermanentError):
    """The host key is unknown or changed; retrying will not help."""


class AuthError(TargetError, PermanentError):
    """Authentication was refused; retrying will not help."""


class SSHConfigError(ConfigError, PermanentError):
    """The SSH config cannot be parsed (`reason`, connecting to `host`): a config error (exit 78), and a
    permanent failure of every host it is used for."""

    def __init__(self, reason: str, *, host: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__("the SSH config", "", f"{reason} (connecting to {host})")


class ConnectionLost(TargetError):
    """The connection dropped or could not be made; it is retried."""


class ChannelRefused(ConnectionLost):
    """The host `where` is reachable but refused another session channel (`detail`): retried after a pause, as
    reconnecting at once would not help."""

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"{where} refused a session channel: {detail}", host=where, reason=detail)


class ReaderProtocolError(TargetError):
    """The host's log reader answered, but not in its protocol (`output`: the start of it); not retried."""

    def __init__(self, host: str, output: bytes) -> None:
        self.output = output
        super().__init__(
            f"unexpected output from the reader on {host}: {output!r}", host=host, reason="unexpected output"
        )


class TLSError(TargetError):
    """The TLS handshake with an https health URL failed (an untrusted certificate, a plain-http port...):
    retrying does not help until the endpoint or the URL is fixed."""

    def __init__(self, url: str, reason: str, *, host: str | None = None) -> None:
        self.url = url
        super().__init__(f"health URL {url}: TLS problem: {reason}", host=host, reason=reason)


class DeliveryError(WatchdogError):
    """A notification could not be delivered to `receiver` (a notifier, or a URL without its secrets);
    `status`: its HTTP status, if it answered."""

    def __init__(self, message: str, *, receiver: str | None = None, status: int | None = None) -> None:
        self.receiver = receiver
        self.status = status
        super().__init__(message)


class TransientDeliveryError(DeliveryError):
    """A network error, a timeout, a 5xx or a 429: retried (after `retry_after` s, if asked)."""

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        receiver: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, receiver=receiver, status=status)
        self.retry_after = retry_after


class InvalidShard(WatchdogError, ValueError):
    """A shard spec ("i/n") or count `text` is wrong (`problem`): a `ValueError`, so that pydantic reports
    it as a config error with its key path; the CLI makes it a usage error (exit 64)."""

    def __init__(self, text: str, problem: str) -> None:
        self.text = text
        self.problem = problem
        super().__init__(f"{text!r}: {problem}")


def first_watchdog_error(group: BaseExceptionGroup[BaseException]) -> WatchdogError | None:
    """The first of our errors in a task group's failure (nested groups included), if any: it, not the
    group, says what went wrong and which exit code that is."""
    # ours alone, nested as they were: its first leaf is the first of ours
    found: WatchdogError | BaseExceptionGroup[WatchdogError] | None = group.subgroup(WatchdogError)
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found


def reason_of(exc: BaseException) -> str:
    """What went wrong, in words: of a task group's failure, our own error first, else its first leaf (not
    "unhandled errors in a TaskGroup")."""
    if isinstance(exc, BaseExceptionGroup):
        ours = first_watchdog_error(exc)
        return str(ours) if ours is not None else reason_of(exc.exceptions[0])
    return str(exc) or type(exc).__name__
