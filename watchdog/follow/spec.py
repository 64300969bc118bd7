"""`LaunchSpec`: what to follow and how, validated on construction (no I/O)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from watchdog.exceptions import ConfigError
from watchdog.follow.sources.target import Target
from watchdog.profiles.model import Profile
from watchdog.vocabulary import (
    DEADLINE_STATES,
    DEFAULT_CRASH_GRACE,
    DEFAULT_GPU_INTERVAL,
    DEFAULT_HANG_AFTER,
    DEFAULT_PROBE_INTERVAL,
    DEFAULT_STALL_AFTER,
    ENGINES,
    check_process,
)

__all__ = ["DEFAULT_QUIET", "DEFAULT_SETTLE", "DEFAULT_TICK", "LaunchSpec"]

DEFAULT_SETTLE = 0.25  # seconds a crash report waits for the other ranks' errors
DEFAULT_QUIET = 0.05  # ... unless the log has been quiet (read to its end) this long
DEFAULT_TICK = 0.25  # seconds between clock ticks (stall, pending errors, deadlines), when one is due

_DEADLINE_PHASES = tuple(s.value for s in DEADLINE_STATES)
_PROCESS_NAMES = ("a pid", "a process pattern", "a pid file")


@dataclass(frozen=True)
class LaunchSpec:
    """What to follow and how, from the command line (`watch`) or the config file (the daemon); validated on
    construction (no I/O): a `ConfigError` names the launch, the field and what is allowed."""

    name: str
    target: Target
    engine: str | None = None  # None: detected from the first lines
    profiles: tuple[Profile, ...] = ()  # user profiles, already loaded
    pid: int | None = None  # the server's pid on the host: gone without a traceback = crashed (killed)
    process: str | None = None  # or a `pgrep -f` pattern
    pid_file: str | None = None  # or a file holding the pid, read on the host at each check
    health_url: str | None = None
    gpu: bool = False
    gpu_interval: float = DEFAULT_GPU_INTERVAL
    stall_after: float | None = DEFAULT_STALL_AFTER
    deadlines: tuple[tuple[str, float], ...] = ()  # (phase, seconds): longer in that phase is stalled
    # once ready: requests running or waiting with no token generated for this long is a serving hang (stalled)
    hang_after: float | None = DEFAULT_HANG_AFTER
    timeout: float | None = None
    crash_grace: float = DEFAULT_CRASH_GRACE
    settle: float = DEFAULT_SETTLE
    quiet: float = DEFAULT_QUIET
    tick: float = DEFAULT_TICK
    probe_interval: float = DEFAULT_PROBE_INTERVAL

    def __post_init__(self) -> None:
        where = f"launch {self.name!r}" if self.name else "launch"
        if not self.name:
            raise ConfigError(where, "name", "a launch needs a name")
        names = (*ENGINES, *(p.name for p in self.profiles))
        if self.engine is not None and self.engine not in names:
            raise ConfigError(
                where, "engine", f"unknown engine {self.engine!r}; allowed: {', '.join(dict.fromkeys(names))}"
            )
        try:
            check_process(self.pid, self.process or None, self.pid_file or None, names=_PROCESS_NAMES)
        except ValueError as exc:
            raise ConfigError(where, "pid", str(exc)) from None
        for key in ("gpu_interval", "crash_grace", "tick", "probe_interval"):
            _check_seconds(where, key, getattr(self, key), zero=False)
        for key in ("settle", "quiet"):
            _check_seconds(where, key, getattr(self, key), zero=True)
        for phase, seconds in self.deadlines:
            if phase not in _DEADLINE_PHASES:
                allowed = ", ".join(_DEADLINE_PHASES)
                raise ConfigError(where, f"deadlines.{phase}", f"unknown phase; allowed: {allowed}")
            _check_seconds(where, f"deadlines.{phase}", seconds, zero=False)
        for key in ("stall_after", "timeout", "hang_after"):
            _check_seconds(where, key, getattr(self, key), zero=False)


def _check_seconds(where: str, key: str, value: float | None, *, zero: bool) -> None:
    # None: not set (a `stall_after` or `timeout` that is off)
    if value is not None and (not math.isfinite(value) or value < 0 or (value == 0 and not zero)):
        allowed = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise ConfigError(where, key, f"{value!r} is not allowed: {allowed}")
