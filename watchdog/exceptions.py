"""The exception tree of watchdog: every error the package raises on purpose.

```
WatchdogError
├── UsageError             bad command line or unreadable input file (exit 64)
├── ConfigError            a config or profile file is invalid (exit 78)
├── TargetError            the target cannot be reached (exit 69)
│   ├── HostKeyError       unknown or changed host key: alert, do not retry
│   ├── AuthError          authentication failed: alert, do not retry
│   └── ConnectionLost     the connection dropped or could not be made: retry
└── DeliveryError          a notification could not be delivered: retry later
```
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ConfigError",
    "ConnectionLost",
    "DeliveryError",
    "HostKeyError",
    "TargetError",
    "UsageError",
    "WatchdogError",
    "first_watchdog_error",
]


class WatchdogError(Exception):
    """Root of every error watchdog raises on purpose."""


class UsageError(WatchdogError):
    """The command line is wrong, or an input file cannot be read (exit 64)."""


class ConfigError(WatchdogError):
    """A configuration or profile file is invalid (exit 78).

    The message names the file, the key path and what is allowed.
    """

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")


class TargetError(WatchdogError):
    """The watched target cannot be reached (exit 69)."""


class HostKeyError(TargetError):
    """The host key is unknown or changed; retrying will not help."""


class AuthError(TargetError):
    """Authentication was refused; retrying will not help."""


class ConnectionLost(TargetError):
    """The connection dropped or could not be made; it is retried."""


class DeliveryError(WatchdogError):
    """A notification could not be delivered; it is retried later."""


def first_watchdog_error(group: BaseExceptionGroup[BaseException]) -> WatchdogError | None:
    """The first of our errors in a task group's failure (nested groups included), if any: it, not the
    group, says what went wrong and which exit code that is."""
    for exc in group.exceptions:
        if isinstance(exc, WatchdogError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = first_watchdog_error(exc)
            if found is not None:
                return found
    return None
