"""Follow a Docker or Podman container's log, here or on an SSH host, one run of the container per stream.

The runtime's CLI does the reading (`docker logs --follow --timestamps`, `docker inspect`; Podman takes the
same flags): over SSH it is the one thing sure to be on the host and to speak to its daemon as the account
may (the `docker` group, rootless Podman), and here it honours `DOCKER_HOST` and the CLI's contexts as the
user's own commands do. See `watchdog.follow.sources.containerlog` for the commands and what they print.

Each chunk carries a cursor (the latest line's timestamp and how many lines at that nanosecond came), so a
reader cut off (the SSH connection dropped, the runtime's daemon restarted, the watchdog restarted) starts
again with `--since` at that time and skips what it had: nothing lost or repeated. A run that ends gives
`Ended` with the state's evidence (exit code, OOMKilled and the memory limit, restarting); the next run of the
container (its restart policy, `docker restart`) is a new stream (`FileRestarted("restarted")`), a container
re-created under the name another one (`FileRestarted("replaced")`). No container of that name yet:
`FileMissing`, and it is waited for.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ObjectSendStream

from watchdog.backoff import FULL_JITTER, backoff
from watchdog.exceptions import ConnectionLost, TargetError
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileMissing,
    FileRestarted,
    SourceItem,
)
from watchdog.follow.sources.commands import LocalRunner, Runner, SSHRunner, run
from watchdog.follow.sources.containerlog import (
    RUN_MARK,
    STATE_MARK,
    ContainerState,
    Cursor,
    LineFilter,
    RecordedEnd,
    Runtime,
    Timestamp,
    end_events_command,
    inspect_command,
    logs_command,
    oom_events_command,
    parse_end_events,
    parse_inspect,
    parse_log_line,
    parse_run_line,
    rest_command,
)
from watchdog.follow.sources.target import Target

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool

__all__ = ["ContainerSource", "source"]

POLL_INTERVAL = 0.25  # seconds between looks at a container that is not there yet, or between its runs
# The reader says CaughtUp when nothing more has come for this long: the runtime does not say when its
# `logs --follow` has given the whole log so far.
CAUGHT_UP_QUIET = 0.1
# reads of a run's rest up to its end (`REST_SCRIPT`) before it is read as before, its end told by a quiet: a
# `logs --until` that keeps failing (a Docker before 18.06 has no `--until`) does not hold the next run back
REST_READS = 3
RETRY_INITIAL = 0.1
# How long an exit by SIGKILL (137) is looked at again for the OOM kill that may follow it into the state (the
# runtime's OOM event reached the state 1.2 s after the exit on a loaded CI machine), and how often
OOM_SETTLE = 2.0
OOM_LOOK = 0.1
SIGKILL_EXIT = 137
RETRY_MAX = 5.0
_BUFFER = 64  # items queued for the consumer before the reader waits for it
_ERROR_LINES = 5  # the runtime's own lines kept to say why a command failed
_FAILS_SAID = 3  # readers in a row that fail at once (the runtime's error, no line) before it is an outage


class _Unavailable(Exception):
    """Internal: the runtime could not be asked now (its daemon is down); said as `Disconnected`, retried."""


class ContainerSource:
    """A container's log through its runtime's CLI, here or on an SSH host (see the module docstring)."""

    def __init__(
        self,
        container: str,
        *,
        runtime: Runtime = "docker",
        pool: SSHPool | None = None,
        target: Target | None = None,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        """Describe the container; nothing runs until `open_follow`.

        Args:
            container: its name (or id); a container re-created under the name is followed on.
            runtime: "docker" or "podman": the CLI run.
            pool: the shared SSH connections, for a container on another host (`target.host`).
            target: where the container runs (its host, port, user); None or no host: here.
            poll_interval: seconds between looks for a container that is not there, or not running.
        """
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self.container = container
        self.runtime: Runtime = runtime
        self.poll_interval = poll_interval
        if target is not None and target.host is not None:
            if pool is None:
                raise ValueError(f"{target} is remote: an SSHPool is needed to follow it")
            self.runner: Runner = SSHRunner(pool, target.host, target.port, target.user)
        else:
            # the logs script ends its `logs` command when its stdin closes
            self.runner = LocalRunner("the local container runtime", lifeline=True)
        self.where = self.runner.where

    async def inspect(self) -> ContainerState | None:
        """The container's state now (None: there is no such container).

        Raises:
            TargetError: the runtime is not installed there, or refuses this account.
            ConnectionLost: the host could not be reached.
        """
        out, code, errors = await run(self.runner, inspect_command(self.runtime, self.container))
        state = parse_inspect(out)
        if state is not None or code == 0:
            return state
        said = _said(errors.encode() + out)
        lowered = said.lower()
        if "no such" in lowered or "no container with" in lowered:
            return None
        if code == 127 or ("not found" in lowered and self.runtime in lowered):
            raise TargetError(f"{self.runtime} is not installed on {self.runner.where}: {said}", reason=said)
        if "permission denied" in lowered:
            raise TargetError(
                f"{self.runner.where}: this account may not use {self.runtime} ({said}); add it to the "
                f"`docker` group, or give it DOCKER_HOST of a socket it may use",
                reason=said,
            )
        raise _Unavailable(said or f"{self.runtime} inspect exited {code}")

    async def oom_recorded(self, state: ContainerState) -> bool:
        """Whether the runtime recorded the kernel's OOM kill of `state`'s run (an `oom` event since it began).
        Docker keeps a kill it learned of after the exit out of `State.OOMKilled` for good; False where the
        runtime keeps no such record (Podman) or did not answer.

        Raises:
            ConnectionLost: the host could not be reached.
        """
        if self.runtime != "docker":
            return False
        out, code, _ = await run(self.runner, oom_events_command(self.runtime, state.id, state.started_at))
        return code == 0 and any(line.strip().isdigit() for line in out.splitlines())

    async def recorded_end(self, state: ContainerState, until: Timestamp) -> RecordedEnd | None:
        """How `state`'s run ended (its exit code, an OOM kill), as the runtime's events recorded it up to `until`
        (the next run's start): for a run whose end its state no longer says. None where the runtime keeps no
        such record (Podman; Docker after its own restart, or past its last 256 events) or did not answer.

        Raises:
            ConnectionLost: the host could not be reached.
        """
        if self.runtime != "docker" or not state.started:
            return None
        argv = end_events_command(self.runtime, state.id, state.started_at, until)
        out, code, _ = await run(self.runner, argv)
        return parse_end_events(out) if code == 0 else None

    async def stream_id(self) -> tuple[int, int] | None:
        """The current run's stream id (None: no such container): a checkpoint resumes by cursor in it."""
        state = await self.inspect()
        return None if state is None else state.stream

    async def previous_stream_id(self, cursor: str | None = None) -> tuple[int, int] | None:
        """The stream id of the container's run before its current one, when `cursor` (a checkpoint's) is in
        it: its restart policy restarted the container once since (`Cursor.names_run_before`), and its lines
        are still in the container's log. A checkpoint of it resumes there (`KeepsPrevious`). The runtime
        names only the latest run, so without a cursor (or with one of an older watchdog) there is none.
        """
        try:
            parsed = None if cursor is None else Cursor.parse(cursor)
        except ValueError:
            return None
        state = await self.inspect()
        if parsed is None or state is None or not parsed.names_run_before(state):
            return None
        return (0, parsed.stream)

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the container's current run from `cursor` (None: the run's start), chunks numbered on from
        `offset`; see `watchdog.follow.sources.base.Source`."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        parsed = None if cursor is None else Cursor.parse(cursor)
        return _open(_Reader(self, offset, parsed))


@asynccontextmanager
async def _open(reader: _Reader) -> AsyncGenerator[AsyncIterator[SourceItem], None]:
    send, receive = anyio.create_memory_object_stream[SourceItem | BaseException](_BUFFER)
    async with receive, anyio.create_task_group() as tg:
        tg.start_soon(reader.run, send)
        try:
            yield _items(receive)
        finally:
            tg.cancel_scope.cancel()


async def _items(
    receive: anyio.abc.ObjectReceiveStream[SourceItem | BaseException],
) -> AsyncIterator[SourceItem]:
    async for item in receive:
        if isinstance(item, BaseException):
            raise item
        yield item


def _said(output: bytes) -> str:
    lines = output.decode(errors="replace").strip().splitlines()
    return " / ".join(line.strip() for line in lines[-_ERROR_LINES:])


class _Reader:
    """One `open_follow`: which run is read, how far, and what was said of it."""

    def __init__(self, source: ContainerSource, offset: int, cursor: Cursor | None) -> None:
        self.src = source
        self.offset = offset
        self.cursor = cursor  # where to resume the first run seen (None: its start)
        self.state: ContainerState | None = None  # of the run being read
        self.filter: LineFilter | None = None
        self.ended = False  # Ended said for the run being read
        self.removed = False  # the container read was removed: the next one found is another
        self.missing_said = False
        self.down: str | None = None  # what Disconnected said, until Connected
        self.at_end = False  # CaughtUp said and nothing since
        self.failing = 0  # readers in a row that ended at once with the runtime's own error
        # whether the last `logs` was cut (killed, failed, its output lost) rather than ending at its run's end, and
        # whether the run's end was already read again from the cursor after such a cut
        self.cut = self.drained = False
        self.next_run: ContainerState | None = (
            None  # the run the reader found the container in, if a later one
        )
        self.run_end: Timestamp | None = None  # lines after this are a later run's (None: not known to end)
        # the run read is the one before the container's current run (a checkpoint's, resumed after its restart
        # by the policy): how it ended, as much as is known, and the current run, which follows it
        self.prior_end: Ended | None = None
        self.successor: ContainerState | None = None
        # that run's end (the current run's start), where its rest is read up to it by a `logs` that ends there
        # (Docker's `--until`): None while the run read may go on, or its end is told by a quiet (Podman)
        self.until: Timestamp | None = None
        self.rest_reads = 0  # of the run read
        self.send: ObjectSendStream[SourceItem | BaseException] | None = None

    async def _say(self, item: SourceItem) -> None:
        assert self.send is not None
        await self.send.send(item)

    async def run(self, send: ObjectSendStream[SourceItem | BaseException]) -> None:
        self.send = send
        async with send:
            try:
                await self._follow()
            except Exception as exc:
                await send.send(exc)

    async def _follow(self) -> None:
        failed = 0
        while True:
            try:
                state = await self.src.inspect()
                await self._up()
                wait = await self._step(state)
                failed = 0
            except (ConnectionLost, _Unavailable) as exc:
                failed += 1
                await self._lost(str(exc))
                wait = backoff(failed, first=RETRY_INITIAL, cap=RETRY_MAX, jitter=FULL_JITTER)
            if wait:
                await anyio.sleep(wait)

    async def _up(self) -> None:
        if self.down is not None:
            self.down = None
            await self._say(Connected(self.src.where))

    async def _lost(self, reason: str) -> None:
        if reason != self.down:
            self.down = reason
            await self._say(Disconnected(self.src.where, reason))

    async def _step(self, state: ContainerState | None) -> float:
        """Act on the container's state; the pause before the next look."""
        if state is not None and not state.started:
            state = (
                None  # created and not started yet (`docker create`, or `run` caught between): no run to read
            )
        if state is None:
            if self.state is not None:  # removed (`docker rm -f`) while read: its run is over
                await self._end(Ended("the container was removed"))
                self.state, self.removed = None, True
            if not self.missing_said:
                self.missing_said = True
                await self._say(FileMissing(self.src.container))
            return self.src.poll_interval
        self.missing_said = False
        if self.state is None or (state.stream != self.state.stream and not self._rest_of(state)):
            await self._begin(state)
        elif self.ended:
            return self.src.poll_interval  # the run is over: waiting for the next
        after = await self._read() or await self.src.inspect()
        state = self.state or state  # the reader may have moved on to the next run
        if after is None:
            return 0.0  # removed: said at the next step
        if after.stream != state.stream:
            if self._rest_of(after) and self.cut:
                # the earlier run's rest was cut: read again, from the cursor, to its end
                return RETRY_INITIAL
            # the next run began before we looked: this one's exit is no longer in the state
            self.until = None
            await self._end(await self._restarted(state, after))
            return 0.0
        if not after.running or after.restarting:
            if self.cut and not self.drained:
                # `logs` was cut, not ended by the run's end (killed as the run ended): what the run wrote after
                # the cursor is read once more before its end is said (`logs` of an ended run gives it and stops)
                self.drained = True
                return RETRY_INITIAL
            await self._end(_ended(await self._settled(after), self.src.runtime))
            return self.src.poll_interval
        # `logs` ended while the run goes on (its daemon restarted, say): read on from the cursor
        return backoff(self.failing, first=RETRY_INITIAL, cap=RETRY_MAX) if self.failing else RETRY_INITIAL

    async def _settled(self, state: ContainerState) -> ContainerState:
        """The run's end as the runtime settles it: the kernel's OOM kill is a separate event that can reach
        the runtime just after the exit (exit 137 without OOMKilled, seen here; Docker then records the event
        but leaves the flag unset), so a 137 is looked at again for a moment, in the state and in the
        runtime's events, as long as the run stays over."""
        deadline = anyio.current_time() + OOM_SETTLE
        while state.exit_code == SIGKILL_EXIT and not state.oom_killed and anyio.current_time() < deadline:
            if await self.src.oom_recorded(state):
                return replace(state, oom_killed=True)
            await anyio.sleep(OOM_LOOK)
            again = await self.src.inspect()
            if again is None or again.stream != state.stream or (again.running and not again.restarting):
                # the run is gone or replaced (a restart policy's next run): its state no longer changes, but
                # the runtime's events may have learned of its kill since the last look
                if await self.src.oom_recorded(state):
                    return replace(state, oom_killed=True)
                break
            state = again
        return state

    def _rest_of(self, state: ContainerState) -> bool:
        """Whether the run read is an earlier run of `state`'s container whose rest is read up to its end."""
        return self.until is not None and self.state is not None and state.id == self.state.id

    async def _begin(self, state: ContainerState) -> None:
        stream, previous = state.stream[1], self.state
        self.until, self.rest_reads = None, 0
        if (
            previous is not None or self.removed
        ):  # the run read before is over: a restart, or another container
            same = previous is not None and state.id == previous.id
            if previous is not None and not self.ended:
                await self._end(await self._restarted(previous, state))
            if same and self.successor is not None and state.stream == self.successor.stream:
                state = self.successor  # with its restart count, which the `RUN_MARK` line does not say
            await self._say(FileRestarted("restarted" if same else "replaced"))
            after = state.run_since
            if same and self.filter is not None and self.filter.at is not None:
                # lines up to the last one read belong to the run before
                after = self.filter.at if after is None else max(after, self.filter.at)
            self.filter, self.offset = LineFilter(stream, after=after, run=state), 0
            self.prior_end = self.successor = None
        elif self.cursor is not None and self.cursor.stream == stream:
            self.filter = LineFilter(stream, cursor=self.cursor)
        elif self.cursor is not None and self.cursor.names_run_before(state):
            # the checkpoint's run, which the policy restarted while nobody read: its rest (up to the current
            # run's first line, see `_run_line`) is in the container's log, its end (`prior_end`) after it
            self.filter = LineFilter(self.cursor.stream, cursor=self.cursor)
            before = replace(state, started_at=self.cursor.started or self.cursor.at)
            recorded = await self.src.recorded_end(before, state.started_at)
            self.prior_end, self.successor = _restarted_by_policy(state, recorded), state
            self.until = state.run_since
            state = replace(
                state,
                started_at=self.cursor.started or state.started_at,
                finished_at=None,
                running=False,
                restarting=False,
                restart_count=self.cursor.restarts,
            )
        else:
            if self.cursor is not None:  # the cursor's run (or container) is gone: this one from its start
                await self._say(FileRestarted("replaced"))
                self.offset = 0
            self.filter = LineFilter(stream, after=state.run_since, run=state)
        self.state, self.cursor, self.removed = state, None, False
        self.ended = self.at_end = self.drained = False

    async def _restarted(self, state: ContainerState, after: ContainerState) -> Ended:
        """The end of `state`'s run, whose exit the runtime no longer says: the next run of the container, or
        another container under the name (`after`), began before the reader saw it end. The exit code and an
        OOM kill are taken from the runtime's events where it recorded them."""
        same = after.id == state.id
        if same and self.prior_end is not None:
            return self.prior_end
        if same:
            recorded = await self.src.recorded_end(state, after.started_at)
            if recorded is not None:
                ended = replace(
                    state,
                    running=False,
                    restarting=False,
                    exit_code=recorded.exit_code,
                    oom_killed=recorded.oom_killed,
                    memory_limit=after.memory_limit,
                    error="",
                )
                end = _ended(ended, self.src.runtime)
                return replace(end, detail=f"{end.detail}; it was restarted", restarting=True)
        how = "restarted" if same else "replaced"
        return Ended(f"the container was {how}", restarting=same)

    async def _end(self, ended: Ended) -> None:
        """Say once that the run read is over (after its last chunk and a CaughtUp)."""
        if self.ended:
            return
        self.ended = True
        if not self.at_end:
            self.at_end = True
            await self._say(CaughtUp(self.offset))
        await self._say(ended)

    async def _read(self) -> ContainerState | None:
        """Read the run's log from the cursor until the logs command ends (the container stopped, is gone, or
        the command was cut); the container's state the script printed then (None: it did not)."""
        state, lines = self.state, _LineSplitter()
        assert self.filter is not None
        assert state is not None
        self.filter.restart()
        since = self.filter.resume_since()
        if self.until is not None and since is not None and self.rest_reads < REST_READS:
            self.rest_reads += 1
            argv = rest_command(self.src.runtime, state.id, since, self.until)
        else:  # (after REST_READS that failed: read as a running run's, its end told by a quiet)
            self.until = None
            argv = logs_command(self.src.runtime, state.id, since)
        delivered = False
        self.next_run = self.run_end = None
        async with self.src.runner.open(argv) as stream:
            await self._up()
            while True:
                data: bytes | None = b""  # b"": quiet (None: the command ended)
                if self.at_end:
                    data = await stream.receive()
                else:
                    with anyio.move_on_after(CAUGHT_UP_QUIET):
                        data = await stream.receive()
                    if data == b"":  # quiet: what the runtime had is delivered
                        self.at_end = True
                        await self._say(CaughtUp(self.offset))
                        if self._superseded():
                            if self._read_rest():
                                break  # its rest, to its end, by a `logs` that ends there (see `_step`)
                            # the run read ended before the reader started, its lines all given: the one the
                            # reader started in follows it now, not with its first line (it may print none yet)
                            await self._next_run()
                        continue
                delivered |= await self._deliver(lines.feed(data) if data else lines.end())
                if not data:
                    break
        if lines.said and not delivered:
            self.failing += 1
            if self.failing >= _FAILS_SAID:
                said = _said(b"\n".join(lines.said))
                raise _Unavailable(f"{self.src.runtime} logs: {said}")
        else:
            self.failing = 0
        self.cut = lines.logs_exit != 0  # None: the script's mark never came (its command or connection cut)
        try:
            return None if lines.state is None else parse_inspect(bytes(lines.state))
        except ValueError:
            return None

    async def _deliver(self, lines: list[bytes]) -> bool:
        out, delivered = bytearray(), False
        for line in lines:
            if line.startswith(RUN_MARK):
                self._run_line(line)
                continue
            parsed = parse_log_line(line)
            if parsed is None:
                continue
            if self.run_end is not None and parsed[0] > self.run_end:
                # the first line of a run after the one read: that one is over, this one begins
                delivered |= await self._flush(out)
                out = bytearray()
                await self._next_run()
            assert self.filter is not None
            if self.filter.admit(parsed[0]):
                out += parsed[1] + b"\n"
        return await self._flush(out) or delivered

    def _read_rest(self) -> bool:
        """Whether the run read, which ended before the reader started (`_superseded`), is read to its end by a
        `logs` that ends there: a quiet after the reader's start is no proof that the lines before that end are
        all given (the runtime's `logs` may not have printed its first one yet on a loaded host)."""
        assert self.filter is not None
        if self.run_end is None or self.filter.resume_since() is None:
            return False
        self.until = self.run_end
        return True

    def _superseded(self) -> bool:
        """Whether the reader started in a later run than the one read (its `RUN_MARK` line said so)."""
        return self.next_run is not None

    async def _next_run(self) -> None:
        """The run read is over: the next one (the one the reader started in, or the container's now) begins."""
        following = self.next_run or await self.src.inspect()
        self.run_end = self.next_run = None
        if following is not None and self.state is not None and following.stream != self.state.stream:
            await self._begin(following)

    def _run_line(self, line: bytes) -> None:
        """The run the reader started in: if it is a later one than the run read (which ended before the reader
        started), its lines (after that run's start) are the next stream's."""
        assert self.state is not None
        run = parse_run_line(line, self.state)
        if run is None:
            return
        if run.stream != self.state.stream and run.started_at > self.state.started_at:
            self.next_run, self.run_end = run, run.run_since
        elif run.finished_at is not None and run.finished_at > run.started_at:
            # the run read is over (exited, or its restart policy is about to start the next one, which `logs
            # --follow` then follows too): what comes after its end is the next run's
            self.run_end = run.finished_at

    async def _flush(self, out: bytearray) -> bool:
        if not out:
            return False
        assert self.filter is not None
        assert self.state is not None
        self.at_end = False
        await self._say(Chunk(self.offset, bytes(out), self.state.stream, cursor=self.filter.cursor))
        self.offset += len(out)
        return True


class _LineSplitter:
    """Whole lines out of the logs script's output; the runtime's own lines (no timestamp) kept apart, and the
    state the script prints after `STATE_MARK`."""

    def __init__(self) -> None:
        self.pending = b""
        self.said: list[bytes] = []
        self.state: bytearray | None = None  # the inspect output after the mark, once it came
        self.logs_exit: int | None = None  # the `logs` command's exit status, on the mark's line

    def feed(self, data: bytes) -> list[bytes]:
        if self.state is not None:
            self.state += data
            return []
        *lines, self.pending = (self.pending + data).split(b"\n")
        return self._keep(lines)

    def end(self) -> list[bytes]:
        # a run's last line without a newline is still a line (the runtime ends its message there)
        lines, self.pending = ([self.pending] if self.pending and self.state is None else []), b""
        return self._keep(lines)

    def _keep(self, lines: list[bytes]) -> list[bytes]:
        for n, line in enumerate(lines):
            if line.startswith(STATE_MARK):
                status = line[len(STATE_MARK) :].strip()
                self.logs_exit = int(status) if status.isdigit() else -1
                self.state = bytearray(b"\n".join(lines[n + 1 :]) + b"\n" + self.pending)
                self.pending = b""
                return lines[:n]
            if parse_log_line(line) is None and line.strip():
                self.said = [*self.said[-_ERROR_LINES:], line]
        return lines


def _ended(state: ContainerState, runtime: Runtime) -> Ended:
    """The evidence of a run that is over, from its state."""
    if state.oom_killed:
        limit = f" (memory limit {state.memory_limit} bytes)" if state.memory_limit else ""
        detail = f"the container was killed for memory (OOMKilled){limit}, exit code {state.exit_code}"
    elif state.error:
        detail = f"{runtime} could not run the container: {state.error}"
    else:
        detail = f"the container exited with code {state.exit_code}"
    if state.restarting:
        detail += "; its restart policy restarts it"
    return Ended(
        detail,
        exit_code=state.exit_code,
        oom_killed=state.oom_killed,
        memory_limit=state.memory_limit,
        restarting=state.restarting,
    )


def _restarted_by_policy(state: ContainerState, recorded: RecordedEnd | None = None) -> Ended:
    """The end of the run before `state`'s, which the container's restart policy restarted into it while nobody
    read (the watchdog was down). The runtime's state says only the latest run: the exit code and an OOM kill
    are those its events recorded (`recorded`), as a watchdog that had been running would have seen them.

    Where the runtime has no such record (Podman; Docker restarted since, or past its last 256 events), it is
    said without an exit code: the lifecycle judges it `crashed` (category `killed`) unless the log said why
    (an error read, or a clean shutdown already `stopped`). That is the verdict: with `on-failure` the policy
    restarts only a failed run (a non-zero exit), so it did fail; with `always` or `unless-stopped` it may have
    exited 0, but a server that nobody stopped (`docker stop` is never restarted by a policy) ended on its own,
    and its launch did not come to an end it meant.
    """
    policy = state.restart_policy or "its"
    count = f"restart {state.restart_count}"
    if recorded is not None:
        how = "was killed for memory (OOMKilled)" if recorded.oom_killed else "exited"
        limit = (
            f" (memory limit {state.memory_limit} bytes)"
            if recorded.oom_killed and state.memory_limit
            else ""
        )
        detail = (
            f"the container {how}{limit} with code {recorded.exit_code} and its restart policy ({policy}) "
            f"restarted it ({count}); its end is the runtime's record (the watchdog was not running)"
        )
        return Ended(
            detail,
            exit_code=recorded.exit_code,
            oom_killed=recorded.oom_killed,
            memory_limit=state.memory_limit if recorded.oom_killed else None,
            restarting=True,
        )
    if policy == "on-failure":
        detail = f"the container failed and its restart policy (on-failure) restarted it ({count})"
    else:
        detail = f"the container ended and its restart policy ({policy}) restarted it ({count})"
    return Ended(f"{detail}; its exit code was not seen (the watchdog was not running)", restarting=True)


def source(target: Target, pool: SSHPool | None = None) -> ContainerSource:
    """The source of a `docker://` or `podman://` target (the registry's entry point)."""
    runtime: Runtime = "podman" if target.kind == "podman" else "docker"
    return ContainerSource(target.path, runtime=runtime, pool=pool, target=target)
