"""A container runtime's log and state as the CLI gives them: command lines, timestamped lines, state, cursor.

Pure: no I/O. `watchdog.follow.sources.docker` runs the commands (here or on an SSH host) and feeds what
they print to these parsers. Docker and Podman take the same flags:

    docker logs --follow --timestamps --since T ID   each line as `2026-12-04T17:32:59.767608944Z TEXT`,
                                                      stdout and stderr in the order the runtime stored them
    docker inspect --type container NAME             a JSON list of one object (`[]` and exit 1 if none)

A *run* of a container (its process from start to exit) is one stream of the launch: a restart by its policy
or `docker restart` begins another run of the same container (new `State.StartedAt`), a container re-created
under the same name another container (new `Id`). Both keep their lines in the container's one log, so a
run's lines are those after the end of the run before it (`State.FinishedAt`, which the runtime sets once
that run's output is written: the line timestamps of a run are all before it).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

__all__ = [
    "LOGS_SCRIPT",
    "REST_SCRIPT",
    "RUN_MARK",
    "RUN_START_SLACK",
    "STATE_MARK",
    "ContainerState",
    "Cursor",
    "LineFilter",
    "RecordedEnd",
    "Runtime",
    "Timestamp",
    "end_events_command",
    "format_timestamp",
    "inspect_command",
    "logs_command",
    "parse_end_events",
    "parse_inspect",
    "parse_log_line",
    "parse_run_line",
    "parse_timestamp",
    "rest_command",
    "run_stream",
]

Runtime = Literal["docker", "podman"]
Timestamp = tuple[int, int]  # (unix seconds, nanoseconds): exact, where a float would round nanoseconds

# A run's first lines can be stamped a little before its StartedAt (the process runs before the runtime
# records its start: 2 ms seen here). When the run before is unknown (the container has exited and says only
# its last run's times) a run is taken to begin this long before StartedAt: less than the shortest gap between
# two runs (a restart policy waits 100 ms at least, and creating the new process takes more).
RUN_START_SLACK = 0.05
# `--since` is asked a nanosecond before the time meant: Docker's gives the lines stamped with it, Podman's (4.3)
# does not, and those are the lines at a cursor's time not read yet (Podman stamps the lines of one write alike).
# What comes before the time meant is dropped as before (`LineFilter.admit`).
SINCE_SLACK = 1e-9

_ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: a container that never finished a run
_TIMESTAMP = re.compile(rb"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ")
_TEXT_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")

# `sh -c LOGS_SCRIPT NAME RUNTIME CONTAINER SINCE`: the runtime's `logs` with stderr into stdout (one ordered
# stream; the runtime's own error lines have no timestamp), ended when stdin closes. Over SSH that is when the
# channel or its connection closes: `docker logs --follow` of a quiet container would otherwise wait on the
# host until its next line found the pipe gone. (An asynchronous list's stdin is /dev/null in sh: hence fd 3.)
# First it says `RUN_MARK ID STARTED FINISHED RUNNING`: the run the container is in as `logs` starts, on the host
# (a reader started after the run it was meant for has ended reads the next run's lines too: they are told apart
# by that run's start). The times as JSON: RFC 3339 in quotes from both runtimes (a plain `{{.State.StartedAt}}` is
# Docker's string but Podman's Go time, printed `2026-12-07 21:26:51.5 +0000 UTC`, spaces and all). When `logs`
# ends, the script says `STATE_MARK STATUS` on a line of its own and the container's `inspect`: the state of the
# run that just ended, taken on the host at once (over SSH a second command would come a round trip later, when a
# restart policy may have started the next run and the exit code is gone).
LOGS_SCRIPT = """\
case $1 in docker|podman) ;; *) exit 2;; esac
r=$1 c=$2 s=$3
echo "watchdog-run $("$r" inspect --type container --format '{{.Id}} {{json .State.StartedAt}} {{json .State.FinishedAt}} {{.State.Running}}' -- "$c" 2>/dev/null)"
exec 3<&0
if [ -n "$s" ]; then set -- --since "$s"; else set --; fi
"$r" logs --follow --timestamps "$@" -- "$c" 3<&- 2>&1 & p=$!
{ cat <&3 >/dev/null; kill $p; } >/dev/null 2>&1 &
wait $p; e=$?
echo; echo "watchdog-state $e"
"$r" inspect --type container -- "$c" 3<&- 2>&1
"""
# `sh -c REST_SCRIPT NAME RUNTIME CONTAINER SINCE UNTIL`: the rest of a run known to be over (the watchdog was down
# when its restart policy started the next one), from a time up to the run's end: the runtime's `logs` without
# --follow, which ends once they are all out. No quiet can tell that of `logs --follow`: on a loaded host it may
# take longer to print its first line than a reader waits for one. Then `STATE_MARK STATUS` and the container's
# `inspect`, as LOGS_SCRIPT ends. `--until`: Docker 18.06 and later, Podman 3 and later.
REST_SCRIPT = """\
case $1 in docker|podman) ;; *) exit 2;; esac
"$1" logs --timestamps --since "$3" --until "$4" -- "$2" 2>&1; e=$?
echo; echo "watchdog-state $e"
"$1" inspect --type container -- "$2" 2>&1
"""
# The runtime's word on a container, as JSON (the runtime: docker or podman, nothing else; the container)
INSPECT_SCRIPT = """\
case $1 in docker|podman) ;; *) exit 2;; esac
exec "$1" inspect --type container -- "$2"
"""
# Docker's own record of the kernel's OOM kills of one container since a time: the daemon (20.10, and later
# ones the same way) sets State.OOMKilled only when the kernel's OOM event reaches it before the exit, and
# records the event all the same when it comes after, so a 137 without the flag is asked of the events too
# (Podman's OOMKilled comes with the exit, from conmon: it has no such event)
OOM_EVENTS_SCRIPT = """\
case $1 in docker) ;; *) exit 2;; esac
exec "$1" events --since "$3" --until 0s --filter "container=$2" --filter event=oom --format '{{.TimeNano}}'
"""
# Docker's record of how one run of a container ended, for a run whose end was not seen in its state: the next run
# had begun before the reader looked (a restart policy's, 100 ms after the exit), or the watchdog was down. Its
# `die` events (with the exit code) and `oom` events from the run's start to the next run's, oldest first; the
# daemon keeps its last 256 events in memory (none after its own restart). Podman's `died` events are not read.
END_EVENTS_SCRIPT = """\
case $1 in docker) ;; *) exit 2;; esac
exec "$1" events --since "$3" --until "$4" --filter "container=$2" --filter event=die --filter event=oom \\
  --format '{{.Action}} {{index .Actor.Attributes "exitCode"}}'
"""
STATE_MARK = b"watchdog-state"
RUN_MARK = b"watchdog-run"


def parse_timestamp(text: str) -> Timestamp:
    """An RFC 3339 time (nanoseconds at most, `Z` or an offset) as (unix seconds, nanoseconds).

    Raises:
        ValueError: not such a time.
    """
    match = _TEXT_TIMESTAMP.match(text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    base, fraction, zone = match.groups()
    moment = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    return int(moment.timestamp()), int((fraction or "0").ljust(9, "0"))


def format_timestamp(stamp: Timestamp) -> str:
    """(unix seconds, nanoseconds) as RFC 3339 in UTC with nine digits: what `--since` takes."""
    seconds, nanos = stamp
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def _minus(stamp: Timestamp, seconds: float) -> Timestamp:
    total = stamp[0] * 1_000_000_000 + stamp[1] - round(seconds * 1e9)
    seconds_part, nanos = divmod(total, 1_000_000_000)
    return seconds_part, nanos


def parse_log_line(line: bytes) -> tuple[Timestamp, bytes] | None:
    """One line of `logs --timestamps` (its newline included or not) as (timestamp, text after the space);
    None for a line without a timestamp (the runtime's own message)."""
    match = _TIMESTAMP.match(line)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    tz = UTC
    if zone != b"Z":  # a runtime that prints local time (podman, at times)
        sign = 1 if zone[:1] == b"+" else -1
        tz = timezone(timedelta(minutes=sign * (int(zone[1:3]) * 60 + int(zone[4:6]))))
    moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz)
    nanos = int((fraction or b"0").ljust(9, b"0"))
    return (int(moment.timestamp()), nanos), line[match.end() :]


def logs_command(runtime: Runtime, container: str, since: Timestamp | None) -> list[str]:
    """The argv that follows `container`'s log from `since` (inclusive; None: its start) until stdin closes,
    then prints its state (see `LOGS_SCRIPT`)."""
    when = "" if since is None else format_timestamp(_minus(since, SINCE_SLACK))
    return ["sh", "-c", LOGS_SCRIPT, "watchdog-container-logs", runtime, container, when]


def rest_command(runtime: Runtime, container: str, since: Timestamp, until: Timestamp) -> list[str]:
    """The argv that prints `container`'s log from `since` to `until` (both inclusive) and ends, then its state
    (see `REST_SCRIPT`)."""
    return [
        "sh",
        "-c",
        REST_SCRIPT,
        "watchdog-container-rest",
        runtime,
        container,
        format_timestamp(_minus(since, SINCE_SLACK)),
        format_timestamp(until),
    ]


def inspect_command(runtime: Runtime, container: str) -> list[str]:
    """The argv that prints `container`'s state as JSON (exit 1 and `[]` when there is no such container)."""
    return ["sh", "-c", INSPECT_SCRIPT, "watchdog-container-inspect", runtime, container]


def oom_events_command(runtime: Runtime, container_id: str, since: Timestamp) -> list[str]:
    """The argv that prints the time (Unix nanoseconds) of each OOM kill that `runtime` recorded for the
    container `container_id` from `since` until now, one per line, and exits (`OOM_EVENTS_SCRIPT`)."""
    return [
        "sh",
        "-c",
        OOM_EVENTS_SCRIPT,
        "watchdog-container-oom",
        runtime,
        container_id,
        format_timestamp(since),
    ]


def end_events_command(runtime: Runtime, container_id: str, since: Timestamp, until: Timestamp) -> list[str]:
    """The argv that prints, one per line, each `die` (with its exit code) and `oom` event that `runtime`
    recorded for the container `container_id` between `since` and `until`, and exits (`END_EVENTS_SCRIPT`)."""
    return [
        "sh",
        "-c",
        END_EVENTS_SCRIPT,
        "watchdog-container-end",
        runtime,
        container_id,
        format_timestamp(since),
        format_timestamp(until),
    ]


@dataclass(frozen=True)
class RecordedEnd:
    """How a run ended, from the runtime's events (`END_EVENTS_SCRIPT`)."""

    exit_code: int
    oom_killed: bool


def parse_end_events(out: str | bytes) -> RecordedEnd | None:
    """The end of the first run in `END_EVENTS_SCRIPT`'s output: its first `die` event's exit code, OOM-killed
    where an `oom` event came before the next `die` (the kernel's event can reach the daemon just after the
    exit); None where no `die` with an exit code was recorded."""
    text = out.decode(errors="replace") if isinstance(out, bytes) else out
    exit_code: int | None = None
    oom = False
    for line in text.splitlines():
        action, _, value = line.strip().partition(" ")
        if action == "oom":
            oom = True
        elif action == "die":
            if exit_code is not None:
                break  # the next run's end
            value = value.strip()
            if not value.isdigit():
                return None
            exit_code = int(value)
    return None if exit_code is None else RecordedEnd(exit_code, oom)


def run_stream(container_id: str, started_at: Timestamp) -> int:
    """The stream id of the run of the container `container_id` that started at `started_at`."""
    digest = hashlib.sha256(f"{container_id} {format_timestamp(started_at)}".encode()).hexdigest()
    return int(digest[:15], 16)


@dataclass(frozen=True)
class ContainerState:
    """What `inspect` says of a container: which run it is in, and how the last one ended."""

    id: str
    name: str
    running: bool
    restarting: bool
    oom_killed: bool
    exit_code: int
    started_at: Timestamp
    finished_at: Timestamp | None  # None: no run has finished yet
    memory_limit: int | None  # bytes (HostConfig.Memory); None: no limit
    status: str  # "running", "exited", "restarting", "created", ...
    error: str  # State.Error: why the runtime could not start it
    # RestartCount: the restarts by its restart policy since it was last started by hand (`docker start` and
    # `docker restart` set it to 0), so that a later run one more than a run's count is the one after it;
    # None: not known (a run the `RUN_MARK` line names)
    restart_count: int | None = 0
    restart_policy: str = ""  # HostConfig.RestartPolicy.Name: "no", "on-failure", "always", "unless-stopped"

    @property
    def started(self) -> bool:
        """Whether a run has begun: a container created and not yet started says Go's zero time as its start."""
        return self.started_at[0] > 0

    @property
    def stream(self) -> tuple[int, int]:
        """The id of the current run's stream: the container and its start, hashed (`Chunk.file`)."""
        return (0, run_stream(self.id, self.started_at))

    @property
    def run_since(self) -> Timestamp | None:
        """Where the current run's lines begin: after the previous run's end where the state still says it
        (a running container), else a little before its start (`RUN_START_SLACK`); None: the log's start."""
        if self.finished_at is not None and self.finished_at < self.started_at:
            return self.finished_at
        if self.finished_at is None and self.running:
            return None  # the first run: everything in the log is its
        return _minus(self.started_at, RUN_START_SLACK)


def parse_run_line(line: bytes, known: ContainerState) -> ContainerState | None:
    """The run a `RUN_MARK` line names, as a state like `known` (the same container) with that run's times;
    None when the line says nothing usable (the container gone, or another one under the name)."""
    fields = line.split()
    if len(fields) != 5 or fields[0] != RUN_MARK or fields[1].decode(errors="replace") != known.id:
        return None
    # quoted (LOGS_SCRIPT's JSON), or bare (a forced-command wrapper of an earlier release: Docker's form)
    started_at, finished_at = fields[2].strip(b'"'), fields[3].strip(b'"')
    try:
        started = parse_timestamp(started_at.decode())
        finished = None if finished_at.startswith(b"0001-01-01") else parse_timestamp(finished_at.decode())
    except ValueError:
        return None
    running = fields[4] == b"true"
    return replace(
        known, started_at=started, finished_at=finished, running=running, restarting=False, restart_count=None
    )


def parse_inspect(output: bytes) -> ContainerState | None:
    """The first container in `inspect`'s JSON output; None when it names none (`[]`, or no JSON at all).

    Raises:
        ValueError: JSON that is not a container's state.
    """
    try:
        data = json.loads(output)
    except ValueError:
        return None
    if not isinstance(data, list) or not data:
        return None
    item = data[0]
    try:
        state, host = item["State"], item.get("HostConfig") or {}
        finished = state.get("FinishedAt") or _ZERO_TIME
        memory = int(host.get("Memory") or 0)
        return ContainerState(
            id=str(item["Id"]),
            name=str(item.get("Name", "")).lstrip("/"),
            running=bool(state.get("Running")),
            restarting=bool(state.get("Restarting")),
            oom_killed=bool(state.get("OOMKilled")),
            exit_code=int(state.get("ExitCode") or 0),
            started_at=parse_timestamp(state.get("StartedAt") or _ZERO_TIME),
            # podman says a never-finished run's time as its zero time too, with another zone at times
            finished_at=None if finished.startswith("0001-01-01") else parse_timestamp(finished),
            memory_limit=memory or None,
            status=str(state.get("Status", "")),
            error=str(state.get("Error") or ""),
            restart_count=int(item.get("RestartCount") or 0),
            restart_policy=str((host.get("RestartPolicy") or {}).get("Name") or ""),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a container's state: {exc!r}") from exc


@dataclass(frozen=True)
class Cursor:
    """Where a reader of one run's log is: just after the `count`-th line stamped `at` (the latest stamp
    delivered), in the run whose stream id is `stream`.

    Lines at the same nanosecond are told apart by how many of them came: `--since at` gives them again
    (inclusive), and the first `count` are skipped. `started` (the run's StartedAt) and `restarts` (its
    RestartCount) name the run itself: the runtime says only a container's latest run, so a cursor of a run
    that its restart policy has followed with another is known by them (`names_run_before`). A cursor written
    without them (an older watchdog's) is still read, and is used only in its own run.
    """

    at: Timestamp
    count: int
    stream: int
    started: Timestamp | None = None
    restarts: int | None = None

    def __str__(self) -> str:
        """The opaque form kept in a checkpoint: `SECONDS.NANOS COUNT STREAM [STARTED RESTARTS]` (the stream in
        hex, the run's start as SECONDS.NANOS)."""
        text = f"{_stamp(self.at)} {self.count} {self.stream:x}"
        if self.started is not None and self.restarts is not None:
            text += f" {_stamp(self.started)} {self.restarts}"
        return text

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """Read a cursor written by `str` (with the run's start and restarts or, as older ones, without).

        Raises:
            ValueError: not such a cursor.
        """
        try:
            fields = text.split()
            if len(fields) not in (3, 5):
                raise ValueError("three or five fields")
            run = (_parse_stamp(fields[3]), int(fields[4])) if len(fields) == 5 else (None, None)
            cursor = cls(_parse_stamp(fields[0]), int(fields[1]), int(fields[2], 16), *run)
        except ValueError as exc:
            raise ValueError(f"not a container log cursor: {text!r} ({exc})") from exc
        if cursor.count < 0 or (cursor.restarts or 0) < 0:
            raise ValueError(f"not a container log cursor: {text!r}")
        return cursor

    def names_run_before(self, state: ContainerState) -> bool:
        """Whether the cursor's run is the run of `state`'s container just before its current one: the same
        container (its id and the run's start hash to the cursor's stream), started earlier, and followed by
        exactly one restart by the policy (RestartCount one more). Several restarts since, or one by hand (which
        sets the count to 0), leave the runs between unknown: then it is not."""
        if self.started is None or self.restarts is None or state.restart_count is None:
            return False
        return (
            run_stream(state.id, self.started) == self.stream
            and self.started < state.started_at
            and state.restart_count == self.restarts + 1
        )


def _stamp(stamp: Timestamp) -> str:
    return f"{stamp[0]}.{stamp[1]:09d}"


def _parse_stamp(text: str) -> Timestamp:
    seconds, _, nanos = text.partition(".")
    if len(nanos) != 9:
        raise ValueError("nine digits of nanoseconds")
    return int(seconds), int(nanos)


class LineFilter:
    """Which lines of a `logs --since` output are new: after the run's start, and not already delivered.

    `--since` is inclusive, so a resumed reader gets again the lines stamped with its cursor's time; those it
    delivered (the first `count` of them) are skipped. It keeps the cursor of what it let through.
    """

    def __init__(
        self,
        stream: int,
        *,
        after: Timestamp | None = None,
        cursor: Cursor | None = None,
        run: ContainerState | None = None,
    ) -> None:
        """Args:
        stream: the run's stream id (kept in the cursors).
        after: lines stamped at or before this belong to an earlier run (None: none do).
        cursor: what was delivered already (None: nothing).
        run: the run read, whose start and restart count the cursors keep (None: the cursor's, if any).
        """
        self.stream = stream
        self.started = run.started_at if run is not None else None if cursor is None else cursor.started
        self.restarts = run.restart_count if run is not None else None if cursor is None else cursor.restarts
        self.after = after
        self.at: Timestamp | None = None if cursor is None else cursor.at
        self.count = 0 if cursor is None else cursor.count
        self._skip = self.count  # lines at `at` still to skip (a resumed reader's repeats)

    def resume_since(self) -> Timestamp | None:
        """The `--since` for a (re)started reader: the cursor's time, else the run's start."""
        return self.at if self.at is not None else self.after

    def restart(self) -> None:
        """A new reader starts at `resume_since`: the lines at the cursor's time come again."""
        self._skip = self.count

    def admit(self, stamp: Timestamp) -> bool:
        """Whether the line stamped `stamp` is new (then the cursor moves past it)."""
        if self.after is not None and stamp <= self.after:
            return False
        if self.at is not None and stamp < self.at:
            return False  # before the cursor: `--since` should not give it; never delivered twice
        if stamp == self.at:
            if self._skip:
                self._skip -= 1
                return False
            self.count += 1
            return True
        self.at, self.count, self._skip = stamp, 1, 0
        return True

    @property
    def cursor(self) -> str | None:
        """The cursor just after the last line let through (None: none yet)."""
        if self.at is None:
            return None
        return str(Cursor(self.at, self.count, self.stream, self.started, self.restarts))
