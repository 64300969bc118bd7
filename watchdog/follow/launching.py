"""Launch mode's hands on a host: start a server detached (its own session), and end its process group; or
start, stop and kill a container through its runtime's CLI.

Every script here is a constant run as `sh -c SCRIPT NAME ARG...`: the log's path, the working directory, each
`KEY=VALUE` and each word of the command are arguments, quoted one by one for the remote shell
(`commands.SSHRunner` joins them with `shlex.join`), never text of the script. So a command's arguments with
spaces, quotes, `$`, `;` or backticks reach the server exactly as given.

A started server is its own session and process group leader (`setsid`): its pid is the group's id and the
session's, written beside the log (`PATH.pid`), and what it and its children (tensor-parallel workers) left
running is found by that session (`pgrep -s`), which `kill_group` ends: SIGTERM, then SIGKILL after a grace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from watchdog.exceptions import StartFailed, TargetError
from watchdog.follow.sources.commands import Runner, run
from watchdog.vocabulary import DEFAULT_STOP_GRACE, pid_file_of

__all__ = [
    "ContainerCommand",
    "ContainerEnded",
    "Killed",
    "LaunchCommand",
    "Started",
    "container_status",
    "end_container",
    "kill_group",
    "log_size",
    "read_pid",
    "start",
    "start_container",
]

_NOT_FOUND = 127  # the shell's "command not found"

# Exit 127: the command is not found; 125: the log, pid file or working directory cannot be used.
# $1 the log, $2 the pid file, $3 the working directory ('' = the login directory), $4 how many KEY=VALUE follow;
# then the command. Relative paths are the login directory's (as a remote log's are): made absolute before the
# `cd`. The first line of stdout: the log's size before the start (where its new run's bytes begin) and the pid.
_START_SCRIPT = """\
log=$1 pidfile=$2 dir=$3 n=$4
shift 4
case $log in /*) ;; *) log=$PWD/$log ;; esac
case $pidfile in /*) ;; *) pidfile=$PWD/$pidfile ;; esac
while [ "$n" -gt 0 ]; do export "$1" || exit 125; shift; n=$((n - 1)); done
if [ -n "$dir" ]; then cd -- "$dir" || exit 125; fi
if ! command -v "$1" >/dev/null 2>&1; then
  printf '%s: command not found\\n' "$1" >&2
  exit 127
fi
: >>"$log" || exit 125
size=$(wc -c <"$log") || exit 125
setsid "$@" </dev/null >>"$log" 2>&1 &
pid=$!
{ printf '%s\\n' "$pid" >"$pidfile.tmp" && mv -f -- "$pidfile.tmp" "$pidfile"; } || exit 125
printf '%s %s\\n' $size "$pid"
"""

# $1 the session (= group) id, $2 the grace in seconds (an integer; 0: SIGKILL at once). Says
# `PIDS... ; SIGNAL`: the processes found, and the last signal that was needed (none: nothing was running).
# A zombie is gone (its parent, or an init that does not reap, holds only its exit status); so is a process that
# pgrep listed and whose /proc entry is gone by the time it is read (a zombie reaped between the two).
_KILL_SCRIPT = """\
sid=$1 grace=$2
members() {
  for p in $(pgrep -s "$sid" 2>/dev/null); do
    if [ -d /proc/$$ ]; then  # a /proc: a process whose stat is gone ended (and was reaped) after pgrep
      read -r s </proc/$p/stat 2>/dev/null || continue
      case ${s##*") "} in Z*|X*) continue ;; esac
    fi
    printf '%s ' "$p"
  done
}
# the whole group at once (dash wants `--` before a negative pid, busybox ash refuses it)
group() { kill -s "$1" -- -"$sid" 2>/dev/null || kill -s "$1" -"$sid" 2>/dev/null; }
found=$(members)
if [ -z "$found" ]; then echo "; none"; exit 0; fi
sig=TERM
[ "$grace" -gt 0 ] || sig=KILL
group "$sig"
kill -s "$sig" $found 2>/dev/null
waited=0
while [ -n "$(members)" ]; do
  if [ "$sig" = TERM ] && [ "$waited" -ge $((grace * 10)) ]; then
    sig=KILL
    group KILL
    kill -s KILL $(members) 2>/dev/null
  fi
  sleep 0.1
  waited=$((waited + 1))
  [ "$waited" -lt $((grace * 10 + 100)) ] || break
done
echo "$found; SIG$sig"
"""

# $1 the pid file: the pid in it when that process still runs (a zombie is gone), else nothing
_PID_SCRIPT = """\
p=$(head -c 64 -- "$1" 2>/dev/null | tr -d ' \\t\\r\\n') || exit 0
case $p in ''|*[!0-9]*) exit 0 ;; esac
[ -r /proc/$p/stat ] && { read -r s </proc/$p/stat; case ${s##*") "} in Z*|X*) exit 0 ;; esac; }
kill -0 "$p" 2>/dev/null && echo "$p"
exit 0
"""


@dataclass(frozen=True)
class LaunchCommand:
    """What to start: `argv` (the command and its arguments, each passed as given), the log its output is
    appended to, its working directory (None: the login directory), its environment's additions."""

    argv: tuple[str, ...]
    log: str
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.argv or not self.argv[0]:
            raise ValueError("a launch needs a command")
        if self.argv[0].startswith("-"):
            raise ValueError(f"{self.argv[0]!r} is not a command (it starts with '-')")
        for word in (*self.argv, self.log, self.cwd or "", *(f"{k}={v}" for k, v in self.env)):
            if "\0" in word:
                raise ValueError(
                    "a command, its log, directory and environment may not contain NUL characters"
                )
        if not self.log or self.log.endswith("/"):
            raise ValueError(f"{self.log!r} is not a log file's path")

    @property
    def pid_file(self) -> str:
        """Where its pid is written: beside the log (`PATH.pid`)."""
        return pid_file_of(self.log)


@dataclass(frozen=True)
class Started:
    """A server started: its pid (also its process group's and session's id) and the log's size before it."""

    pid: int
    offset: int

    def to_json(self, pid_file: str) -> dict[str, object]:
        """`{"pid": ..., "pgid": ..., "pid_file": ..., "log_offset": ...}` for `--json` and the HTTP API."""
        return {"pid": self.pid, "pgid": self.pid, "pid_file": pid_file, "log_offset": self.offset}


@dataclass(frozen=True)
class Killed:
    """A process group ended (`kill_group`): its id, the pids found in it, the last signal needed (None: nothing
    was running)."""

    pgid: int
    pids: tuple[int, ...]
    signal: str | None

    def to_json(self) -> dict[str, object]:
        """`{"pgid": ..., "pids": [...], "signal": "SIGKILL"}` for `--json` and /status."""
        return {"pgid": self.pgid, "pids": list(self.pids), "signal": self.signal}

    def __str__(self) -> str:
        """What a person reads: `ended process group 4242 (3 processes, SIGTERM)`."""
        if self.signal is None:
            return f"process group {self.pgid}: nothing left running"
        count = len(self.pids)
        return f"ended process group {self.pgid} ({count} process{'es' if count != 1 else ''}, {self.signal})"


async def start(runner: Runner, command: LaunchCommand) -> Started:
    """Start `command` detached where `runner` runs: its own session, stdin from /dev/null, stdout and stderr
    appended to its log, its pid written to its pid file.

    Raises:
        StartFailed: the command is not found there, or its working directory, log or pid file cannot be used.
        TargetError, ConnectionLost: the host cannot be reached.
    """
    argv = [
        "sh",
        "-c",
        _START_SCRIPT,
        "watchdog-launch",
        command.log,
        command.pid_file,
        command.cwd or "",
        str(len(command.env)),
        *(f"{key}={value}" for key, value in command.env),
        *command.argv,
    ]
    out, status, errors = await run(runner, argv)
    said = " ".join(errors.split()) or f"exit status {status}"
    if status == _NOT_FOUND:
        raise StartFailed(
            f"cannot start {command.argv[0]!r} on {runner.where}: command not found",
            host=runner.where,
            status=status,
        )
    fields = out.decode(errors="replace").split()
    if status != 0 or len(fields) != 2 or not all(f.isdigit() for f in fields):
        raise StartFailed(
            f"cannot start {command.argv[0]!r} on {runner.where}: {said}", host=runner.where, status=status
        )
    return Started(pid=int(fields[1]), offset=int(fields[0]))


async def log_size(runner: Runner, log: str) -> int:
    """The size of `log` where `runner` runs (0: there is none yet): where the next run's output will begin."""
    out, status, errors = await run(
        runner, ["sh", "-c", 'wc -c <"$1" 2>/dev/null || echo 0', "watchdog-size", log]
    )
    text = out.decode(errors="replace").strip()
    if status != 0 or not text.isdigit():
        raise TargetError(
            f"reading the size of {log} on {runner.where} failed: {errors.strip()}", host=runner.where
        )
    return int(text)


async def read_pid(runner: Runner, pid_file: str) -> int | None:
    """The pid in `pid_file` where `runner` runs, when that process still runs; None otherwise."""
    out, status, errors = await run(runner, ["sh", "-c", _PID_SCRIPT, "watchdog-pid", pid_file])
    text = out.decode(errors="replace").strip()
    if status != 0:
        raise TargetError(f"reading {pid_file} on {runner.where} failed: {errors.strip()}", host=runner.where)
    return int(text) if text.isdigit() else None


async def kill_group(runner: Runner, pgid: int, *, grace: float = DEFAULT_STOP_GRACE) -> Killed:
    """End the session and process group `pgid` (a started server's pid) where `runner` runs: SIGTERM to every
    process of it, then SIGKILL to those left after `grace` seconds (0: SIGKILL at once).

    Raises:
        TargetError, ConnectionLost: the host cannot be reached, or the kill script failed.
    """
    if pgid <= 1:
        raise ValueError(f"{pgid} is not a process group a launch started")
    seconds = str(max(0, math.ceil(grace)))
    out, status, errors = await run(runner, ["sh", "-c", _KILL_SCRIPT, "watchdog-kill", str(pgid), seconds])
    pids, _, signal = out.decode(errors="replace").strip().rpartition(";")
    if status != 0 or not signal.strip():
        raise TargetError(
            f"ending process group {pgid} on {runner.where} failed: {errors.strip()}", host=runner.where
        )
    found = tuple(int(p) for p in pids.split() if p.isdigit())
    return Killed(pgid=pgid, pids=found, signal=None if signal.strip() == "none" else signal.strip())


# -- containers: the runtime's CLI starts, stops and kills them ------------------------------------------------


@dataclass(frozen=True)
class ContainerCommand:
    """A container launch: `RUNTIME run -d --name NAME [-e KEY=VALUE]... [-w CWD] ARGS...`, where `args` are the
    run's options, the image and its command, each passed as given."""

    runtime: str  # "docker" or "podman"
    name: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None

    def __post_init__(self) -> None:
        if not self.args:
            raise ValueError("a container launch needs the image (and its run options and command)")
        for word in (*self.args, self.name, self.cwd or "", *(f"{k}={v}" for k, v in self.env)):
            if "\0" in word:
                raise ValueError("a container's run arguments may not contain NUL characters")

    def run_argv(self) -> list[str]:
        """The argv that starts it, detached."""
        env = [word for key, value in self.env for word in ("-e", f"{key}={value}")]
        cwd = ["-w", self.cwd] if self.cwd else []
        return [self.runtime, "run", "-d", "--name", self.name, *env, *cwd, *self.args]


@dataclass(frozen=True)
class ContainerEnded:
    """A container stopped or killed: by which command, and its exit code after (None: not known)."""

    name: str
    command: str
    exit_code: int | None

    def to_json(self) -> dict[str, object]:
        """`{"container": ..., "command": "docker stop -t 30", "exit_code": 143}`."""
        return {"container": self.name, "command": self.command, "exit_code": self.exit_code}

    def __str__(self) -> str:
        """What a person reads: `container sglang-kimi ended (docker stop -t 30, exit code 143)`."""
        code = "" if self.exit_code is None else f", exit code {self.exit_code}"
        return f"container {self.name} ended ({self.command}{code})"


async def container_status(runner: Runner, runtime: str, name: str) -> tuple[str, int] | None:
    """The container's status (`running`, `exited`, `created`, ...) and its last exit code; None: no such one.

    Raises:
        TargetError: the runtime cannot be asked (not installed there, this account may not use it).
    """
    argv = [runtime, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name]
    out, status, errors = await run(runner, argv)
    fields = out.decode(errors="replace").split()
    if status == 0 and len(fields) == 2 and fields[1].lstrip("-").isdigit():
        return fields[0], int(fields[1])
    if "no such" in errors.lower():
        return None
    raise TargetError(
        f"{runtime} inspect {name} on {runner.where} failed: {errors.strip()}", host=runner.where
    )


async def start_container(runner: Runner, command: ContainerCommand) -> str:
    """Start the container (a stopped one of its name removed first); its id.

    Raises:
        StartFailed: the runtime refused it (no such image, a bad option, a command not found in the image).
        TargetError: the runtime cannot be asked.
    """
    if await container_status(runner, command.runtime, command.name) is not None:
        _out, status, errors = await run(runner, [command.runtime, "rm", command.name])
        if status != 0:
            raise StartFailed(
                f"cannot remove the old container {command.name} on {runner.where}: {' '.join(errors.split())}",
                host=runner.where,
                status=status,
            )
    out, status, errors = await run(runner, command.run_argv())
    if status != 0:
        said = " ".join(errors.split()) or f"exit status {status}"
        raise StartFailed(
            f"cannot start container {command.name} on {runner.where}: {said}",
            host=runner.where,
            status=status,
        )
    return out.decode(errors="replace").strip()[:12]


async def end_container(runner: Runner, runtime: str, name: str, *, grace: float | None) -> ContainerEnded:
    """`RUNTIME stop -t GRACE NAME` (SIGTERM, then SIGKILL after the grace), or `RUNTIME kill NAME` (`grace`
    None): what ended it and its exit code.

    Raises:
        TargetError: the runtime refused it, or cannot be asked.
    """
    argv = [runtime, "kill", name] if grace is None else [runtime, "stop", "-t", str(math.ceil(grace)), name]
    _out, status, errors = await run(runner, argv)
    if status != 0:
        raise TargetError(f"{' '.join(argv)} on {runner.where} failed: {errors.strip()}", host=runner.where)
    after = await container_status(runner, runtime, name)
    return ContainerEnded(name, " ".join(argv[:-1]), None if after is None else after[1])
