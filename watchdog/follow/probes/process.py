"""Process liveness, by pid or `pgrep -f` pattern, on this machine or over the shared SSH connection."""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio

from watchdog.exceptions import ConnectionLost, TargetError
from watchdog.vocabulary import check_process

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool

DEFAULT_PROCESS_INTERVAL = 1.0
_PGREP_TIMEOUT = 10.0

# A zombie (exited, not yet reaped) is dead for our purposes, though `kill -0` still succeeds.
_PID_SCRIPT = """\
p=$1
if [ -r /proc/$p/stat ]; then
  read -r s < /proc/$p/stat || exit 1
  case ${s##*") "} in Z*|X*) exit 1;; esac
  exit 0
fi
kill -0 "$p" 2>/dev/null
"""
# The pid file's path is an argument ($1), never part of the script; 3 = no readable pid in it (unknown).
_PIDFILE_SCRIPT = f"""\
p=$(head -c 64 -- "$1" 2>/dev/null) || exit 3
p=$(printf '%s' "$p" | tr -d ' \\t\\r\\n')
case $p in ''|*[!0-9]*) exit 3;; esac
set -- "$p"
{_PID_SCRIPT}"""
_UNKNOWN = 3
# The pattern comes on stdin, so that no process but pgrep itself (which pgrep skips) carries
# it on its command line: otherwise the shell running this would match its own pattern (the probe's own
# shell, `exec`ed into pgrep, and the login shell that ran it never match: tests/test_probes.py). The script is
# also in deploy/ssh/llm-launch-watchdog-forced-command: a change here is a change there.
_PGREP_SCRIPT = """\
IFS= read -r p || exit 2
exec pgrep -f -- "$p" >/dev/null
"""


class ProcessProbe(Protocol):
    """Says whether the watched process is still there."""

    async def alive(self) -> bool:
        """True while the process (or one matching the pattern) exists."""
        ...


def _ancestors(pid: int) -> set[int]:
    """`pid` and its ancestors up to init, by the parent pids of /proc (just `pid` where there is no procfs)."""
    seen = {pid}
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                # the parent pid is the 2nd field after the command name, which may hold spaces or ")"
                pid = int(file.read().rpartition(b") ")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid in seen:
            break
        seen.add(pid)
    return seen


def read_pid_file(path: str) -> int | None:
    """The pid written in `path`, or None when the file is missing, unreadable or holds no pid."""
    try:
        with open(path, "rb") as file:
            text = file.read(64).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def _local_pid_file_alive(path: str) -> bool:
    pid = read_pid_file(path)
    return True if pid is None else _local_pid_alive(pid)  # no pid in it: unknown, not gone


def _local_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rpartition(b") ")[2][:1]
    except OSError:
        return True  # no procfs here: kill -0 has answered
    return state not in (b"Z", b"X")


@dataclass(frozen=True, kw_only=True)
class _Named:
    """The process, by exactly one of `pid`, `pattern` (a `pgrep -f` regex) and `pid_file` (read at each
    check, so a restarted server's new pid is followed)."""

    pid: int | None = None
    pattern: str | None = None
    pid_file: str | None = None

    def __post_init__(self) -> None:
        if self.pid is None and self.pattern is None and self.pid_file is None:
            raise ValueError("give exactly one of pid, pattern and pid_file")
        check_process(self.pid, self.pattern, self.pid_file, names=("pid", "pattern", "pid_file"))


@dataclass(frozen=True, kw_only=True)
class LocalProcessProbe(_Named):
    """A process on this machine, by pid (`kill -0`), pid file or command-line pattern (`pgrep -f`)."""

    async def alive(self) -> bool:
        """True while the process exists (a zombie counts as gone; a pid file without a pid: unknown, True)."""
        if self.pid is not None:
            return await anyio.to_thread.run_sync(_local_pid_alive, self.pid)
        if self.pid_file is not None:
            return await anyio.to_thread.run_sync(_local_pid_file_alive, self.pid_file)
        assert self.pattern is not None
        # Shielded, as in the GPU probe: a cancel while the child is spawned would leak it; pgrep is quick.
        with anyio.CancelScope(shield=True), anyio.fail_after(_PGREP_TIMEOUT):
            result = await anyio.run_process(["pgrep", "-f", "--", self.pattern], check=False)
        if result.returncode > 1:
            raise TargetError(f"pgrep -f {self.pattern!r} failed: {result.stderr.decode(errors='replace')}")
        # This process matches too when the pattern is on its own command line, and so do its ancestors:
        # `timeout 45m watchdog watch ... --process PAT`, or the shell that ran it, carry the pattern.
        pids = {int(field) for field in result.stdout.split()}
        return bool(pids - _ancestors(os.getpid()))


@dataclass(frozen=True, kw_only=True)
class SSHProcessProbe(_Named):
    """A process on a remote host, checked over the host's shared SSH connection (the pid file is read on the
    host)."""

    pool: SSHPool = field(kw_only=False)
    host: str = field(kw_only=False)
    port: int | None = None
    user: str | None = None

    async def alive(self) -> bool:
        """True while the process exists on the host.

        Raises:
            ConnectionLost: the host cannot be reached now (the answer is unknown).
            HostKeyError, AuthError: as from `SSHPool.connect`.
        """
        stdin = None
        if self.pid is not None:
            command = shlex.join(["sh", "-c", _PID_SCRIPT, "watchdog-pid", str(self.pid)])
        elif self.pid_file is not None:
            command = shlex.join(["sh", "-c", _PIDFILE_SCRIPT, "watchdog-pidfile", self.pid_file])
        else:
            command = shlex.join(["sh", "-c", _PGREP_SCRIPT, "watchdog-pgrep"])
            stdin = f"{self.pattern}\n"
        result = await self.pool.run(self.host, command, port=self.port, user=self.user, input=stdin)
        if result.exit_status in (0, 1, _UNKNOWN):
            return result.exit_status != 1
        raise TargetError(f"checking the process on {self.host} failed: {result.stderr!r}")


def must_appear(probe: object) -> bool:
    """Whether the probe's process may not have started yet: one named by a pattern or a pid file (a server
    not started yet, a stale pid file) is waited for until it is seen; a pid names a process that exists."""
    return isinstance(probe, _Named) and probe.pid is None


async def wait_until_gone(
    probe: ProcessProbe,
    *,
    interval: float = DEFAULT_PROCESS_INTERVAL,
    appear: bool = False,
    waiting: Callable[[bool], Awaitable[None]] | None = None,
) -> None:
    """Return once the probe says the process is gone, checking every `interval` seconds (a host that cannot
    be reached is not a dead process: the check is tried again).

    Args:
        appear: the process must be seen before it is gone (`must_appear`): one never seen has not started.
        waiting: called with True when a check finds no process to wait for (with `appear`), False once seen.
    """
    seen, said = not appear, False
    while True:
        try:
            alive = await probe.alive()
        except ConnectionLost:
            alive = None  # unknown, not gone: ask again at the next tick
        if alive is False and seen:
            return
        if alive is False and not said and waiting is not None:
            said = True
            await waiting(True)
        elif alive and not seen:
            seen = True
            if said and waiting is not None:
                await waiting(False)
        await anyio.sleep(interval)
