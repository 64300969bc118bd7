"""The launch follower: where one launch's source, clock and probes meet its analyzer; updates go out on a stream.

`watch` runs one follower and stops at its first verdict; the daemon runs many and keeps following; `replay`
is the same analyzer fed a whole file. A follower:

- reads the log from its start; what the file held when the source first catches up with it is judged whole,
  as `replay` judges it (`Analyzer.caught_up`); from then on each transition counts as it happens, so a
  crash followed by a restart in one read is still a crash;
- publishes `Transitioned` (at once, never delayed), `SourceNoted` and `Concluded` on `updates`, a bounded
  stream, or to the one function `listen` was given (the daemon: a plain call, no task woken); `Concluded`
  carries the `watchdog.core.verdict.Verdict` it reports. A crash's report waits a short settle window (ended
  early once the log goes quiet) so that it names every rank that failed, and for a traceback still open to
  close (at most `TRACEBACK_WAIT`), so that it names the exception;
- takes an SSH pool it does not own (the daemon shares one per host), and a clock (tests use
  `watchdog.follow.testing.ManualClock`, so no test sleeps).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from watchdog.clock import Clock, MonotonicClock, wake_up
from watchdog.core.analyzer import Analyzer
from watchdog.core.arguments import from_command
from watchdog.core.compare import Baseline
from watchdog.core.findings import GpuMemorySampled, HealthChecked, LogMissing, ProcessExited
from watchdog.core.lifecycle import Incarnation, Transition
from watchdog.core.redaction import redact_text
from watchdog.core.verdict import MissingLog, Remembered, Status, Verdict, build_verdict, verdict_state
from watchdog.exceptions import ConnectionLost
from watchdog.follow.probes.nvidia import MemoryTrend
from watchdog.follow.sources import (
    Aged,
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileMissing,
    FileRestarted,
    Merges,
    Pushes,
    Source,
    SourceItem,
    open_source,
)
from watchdog.follow.spec import DEFAULT_QUIET, DEFAULT_SETTLE, LaunchSpec
from watchdog.profiles.loader import load_engine
from watchdog.vocabulary import VERDICTS, State

if TYPE_CHECKING:
    from watchdog.follow.checkpoint import Checkpointer, Checkpoints
    from watchdog.follow.probes.gpusampler import HostGpuSampler, LaunchMemoryTrend
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.profiles.model import Profile

__all__ = [
    "DEFAULT_QUIET",
    "DEFAULT_SETTLE",
    "TRACEBACK_WAIT",
    "Clock",
    "Concluded",
    "LaunchFollower",
    "LaunchSpec",
    "Listener",
    "MonotonicClock",
    "SourceNoted",
    "Transitioned",
    "Update",
]

# seconds a ready verdict waits after an early ready line (ReadyReached.early; the latest of them) for the line
# that says the server accepts connections (Uvicorn's "Application startup complete": 0.36-1.63 s after vLLM
# 0.32's last early line, "Available routes are", on a busy 2-core host, and up to 3.1 s after its first), before
# it trusts the early one alone (a log cut there, or Uvicorn at warning level)
READY_CONFIRM = 2.0
# ... or this long, after a line that the confirming line is sure to follow (ReadyReached.confirm_due: vLLM's API
# server's early lines, Uvicorn's "Waiting for application startup."): on a 2-core host loaded 20-50x, vLLM 0.32
# printed nothing for 2.48 s after "Supported tasks" and Uvicorn's outcome came 1.98 s after "Waiting for application
# startup." (twice as long as the longest such gap seen). A log that misses Uvicorn's lines (its stderr not captured,
# --uvicorn-log-level warning, an excerpt) is called ready this much after its last early line, not 2 s
READY_CONFIRM_DUE = 5.0
# seconds of a quiet log (or after a transition) before a tick saves its checkpoint: a shorter pause is a crash
# loop's restart gap (1-2 s) or an engine's lull, and the log is still growing (saved every GROWING_INTERVAL); a save
# at each such pause cost 200 crash-looping launches a record's encoding per crash (a restart is as right
# without it: the store says each launch once; the checkpoint only spares the re-reading)
CHECKPOINT_QUIET = 3.0
# ... or at most this much later (so the clock task is woken early only rarely, and a log that keeps growing is
# looked at for its quiet every CHECKPOINT_SLACK - CHECKPOINT_QUIET seconds, not every CHECKPOINT_QUIET)
CHECKPOINT_SLACK = 10.0
# seconds at most a crash's report waits for a traceback still open when the crash was known (its exception
# line names the crash): the writer may have died mid-way, and then the report goes out with what there is
TRACEBACK_WAIT = 2.0
# seconds at most the reading waits for the checkpoint of a file's first bytes (`Checkpointer.fresh`): once per
# file; a save that takes longer (a host slow to identify the file) goes on later, as the others do
FRESH_SAVE_WAIT = 1.0
# (`_crash_reported`, each chunk: a member looked up on its class costs a metaclass lookup)
_CRASHED = State.CRASHED
UPDATE_BUFFER = 1024  # updates a slow consumer may fall behind before the follower waits for it


@dataclass(frozen=True)
class Transitioned:
    """The launch changed state (published the moment it happened)."""

    launch: str
    transition: Transition


@dataclass(frozen=True)
class SourceNoted:
    """Something happened to the log's source: connected, disconnected, file restarted, file missing.

    `since`: for `disconnected`, the monotonic time the failed connection attempt began, when the source knows it
    (`Disconnected.since`); None otherwise."""

    launch: str
    kind: str
    detail: str
    since: float | None = None
    node: str = ""  # the node of a multi-node launch it is about (`watchdog.follow.nodes`); "" for one source


@dataclass(frozen=True)
class Concluded:
    """A verdict: ready, crashed (reported once its settle window closed), stalled, stopped or timed out."""

    launch: str
    state: State
    verdict: Verdict = field(hash=False, compare=False)
    timed_out: bool = False


Update = Transitioned | SourceNoted | Concluded
# takes each update the moment it is published, in the follower's own task (`LaunchFollower.listen`); it may not wait
Listener = Callable[[Update], None]


@dataclass(frozen=True, slots=True)
class _Fed:
    """A chunk `LaunchFollower._push` fed to the analyzer, and what is left to do with it in the follower's task:
    its transitions to apply and the end of its read (`quiet`: the log had been quiet before it)."""

    chunk: Chunk
    transitions: list[Transition]
    quiet: bool


class LaunchFollower:
    """Follows one launch; see the module docstring.

    Args:
        spec: what to follow.
        pool: the SSH connections to share (not closed here); needed for a remote target or probe.
        source: the log's source; by default made from `spec.target` (and `pool`).
        clock: the time; by default the monotonic clock.
        gpu_sampler: the host's shared GPU sampler (the daemon's, one per host): with `spec.gpu`, memory is
            that of this launch's processes (`spec.pid` or `spec.process`, and their descendants), so another
            launch on the host filling its GPUs never counts as this one's progress. Without it, `spec.gpu`
            samples every GPU of the host (`watch`).
        checkpoints: where this launch's checkpoints are kept (the daemon's state store): the follower resumes
            at the offset of a valid one instead of the log's start, and saves new ones as it reads (see
            `watchdog.follow.checkpoint`). None: always read from the start, save nothing (`watch`, `replay`).
        numbered_after: the launch's last incarnation the daemon knows of (its state file): a log that is not
            the one its checkpoint was taken of (truncated, replaced while the daemon was down) numbers its
            launches after it.
        earlier: what is known of the launch's incarnations before this log's (the daemon's store, or a log
            given to compare with): a verdict says what changed since the one before it.
        offset: without checkpoints, where in the log to start reading (0: its start): `watchdog launch` reads
            only what its own run appends to a log that older runs wrote.
        command: the command line launch mode started the server with: its arguments are the verdict's when
            the engine prints no dump of its own (llama.cpp), so that a relaunch can name what changed.
    """

    def __init__(
        self,
        spec: LaunchSpec,
        *,
        pool: SSHPool | None = None,
        source: Source | None = None,
        clock: Clock | None = None,
        gpu_sampler: HostGpuSampler | None = None,
        checkpoints: Checkpoints | None = None,
        numbered_after: int = 0,
        earlier: Sequence[Baseline] = (),
        command: Sequence[str] = (),
        offset: int = 0,
    ) -> None:
        self.spec = spec
        self._offset = offset
        # why the process is expected to end (a `watchdog stop`): its end is then `stopped`, not a crash
        self._stop_reason: str | None = None
        self._probe: Any = None  # the process probe, when the spec names the process
        self._run_at: int | None = None  # where in the log a run `watchdog start` started begins (unread yet)
        self._watching = False  # a task watches the process (it ends once the process is gone)
        self._runs = 0  # runs `watchdog start` started (`process_started`)
        self._numbered_after = numbered_after
        self._earlier = tuple(earlier)
        self._command = from_command(command) if command else ()
        self.analyzer = Analyzer(
            load_engine(spec.engine, spec.profiles),
            stall_after=spec.stall_after,
            crash_grace=spec.crash_grace,
            deadlines=dict(spec.deadlines),
            hang_after=spec.hang_after,
        )
        self._pool = pool
        self._source = source
        self._aged: Aged | None = None  # the source followed, where it tells its stream's age
        self._clock = clock or MonotonicClock()
        self._start = self._clock.now()
        self._send, self.updates = anyio.create_memory_object_stream[Update](UPDATE_BUFFER)
        self._listener: Listener | None = None  # takes the updates instead of `updates` (see `listen`)
        self._gpu_sampler = gpu_sampler
        self._trend: MemoryTrend | LaunchMemoryTrend = MemoryTrend()
        self._caught_up = False  # the file as it was at the start has been read (or was missing)
        # the engine's rules for a first error are made, or being made (`_prepare`): once the log read at the start
        # showed its engine and no verdict, or else its first live lines its engine
        self._prepared = False
        self._at_end = False  # the last source item was CaughtUp
        self._whole = False  # the analyzer was told it caught up (once told, it stays so: a restart keeps it)
        self._last_data = 0.0
        self._awaiting_ready = False  # ready, but an error already in the log is still being judged
        self._settling: set[int] = set()  # incarnations whose crash report is waiting to be sent
        self._confirming: set[int] = set()  # ... whose ready verdict waits for the server to listen
        self.concluded: Concluded | None = None  # the latest verdict
        self.timed_out = False
        self.last_activity: float | None = None  # Unix time bytes of the log last arrived (None: none yet)
        self._wake_at = math.inf  # when the clock task's next tick is (see `_ticks`)
        # the soonest the clock task looks again whether the log went quiet for its checkpoint, after a tick found
        # it still growing (see `_ticks`)
        self._look_again = -math.inf
        # the clock task's wait, when it waits; its result True: woken early (`_reschedule`)
        self._tick_wake: asyncio.Future[object] | None = None
        self.resumed_at: int | None = None  # the offset resumed at from a checkpoint; None: from the start
        self._checkpoints: Checkpointer | None = None
        # the log's path and when it was first found missing (the follower's clock, and Unix time for people)
        self._missing: tuple[str, float, float] | None = None
        # a restart's transitions, published with the new file's first bytes (see `Checkpointer.fresh`)
        self._deferred: list[Transition] = []
        self._remembered = Remembered()  # what its verdicts made last (see `Remembered`)
        if checkpoints is not None:
            from watchdog.follow.checkpoint import Checkpointer  # noqa: PLC0415 - only the daemon keeps checkpoints

            self._checkpoints = Checkpointer(checkpoints, spec, self._clock.now)

    def now(self) -> float:
        """Seconds since the follower was made, on its clock."""
        return self._clock.now() - self._start

    def listen(self, listener: Listener) -> None:
        """Hand each update to `listener` the moment it is published, a plain call in the follower's task, instead
        of putting it on `updates` (closed: never read): for a consumer that takes every update at once (the
        daemon), whose task would otherwise be woken for each burst of them and go round the event loop again
        before it waits. Set before `run`; `listener` returns at once (what may wait, it queues)."""
        self._listener = listener
        self.updates.close()  # never read

    def status(self, incarnation: int | None = None, *, changes: bool = True) -> Status:
        """A snapshot: the verdict of the incarnation a verdict would report (or of `incarnation`, while the
        analyzer keeps it), and where it stands (its name, target, the follower's clock and the last line a rule
        matched). Credentials in log text stop here: every sink gets the redacted snapshot. `changes=False`: its
        verdict without what changed since the launch before (`build_verdict`)."""
        inc = self._verdict_incarnation() if incarnation is None else self._incarnation(incarnation)
        return Status(
            self._verdict(inc, changes=changes),
            name=self.spec.name,
            target=str(self.spec.target),
            elapsed=self.now(),
            last_line=redact_text(self.analyzer.last_relevant),
        )

    def state(self) -> State:
        """The state `status()` says, without the verdict it would build (systemd's STATUS= counts these)."""
        return verdict_state(self._verdict_incarnation())

    def timing(self, incarnation: int) -> tuple[float, str] | None:
        """`status()`'s clock and last line, while it reports `incarnation` (None once it reports another), without
        the verdict it would build: what an alert adds to a verdict it already has."""
        if self._verdict_incarnation().number != incarnation:
            return None
        return self.now(), redact_text(self.analyzer.last_relevant)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow until cancelled (or the source ends); ready once the log as it was has been read."""
        source = self._source or open_source(self.spec.target, self._pool)
        self._aged = source if isinstance(source, Aged) else None
        started = False
        async with self._send, anyio.create_task_group() as tg:
            self._tg = tg
            offset, cursor = await self._restore(source)
            tg.start_soon(self._ticks)
            self._start_probes(tg)
            try:
                async with source.open_follow(offset, cursor) as items:
                    if isinstance(items, Merges):
                        items.merge = True  # a read's CaughtUp comes with its last chunk: one item per read
                        if isinstance(items, Pushes):
                            items.push = self._push  # a live read, taken in the pass over what changed
                    async for item in items:
                        await self._item(item)
                        if not started and self._caught_up:
                            started = True
                            task_status.started()
                # a source that ends (standard input at its end): what it gave is judged whole, as by `replay`
                await self._end_of_stream()
                if not started:
                    task_status.started()
            finally:
                if self._checkpoints is not None:
                    with anyio.CancelScope(shield=True):
                        await self._checkpoints.save_final(self.analyzer, self.now)
            tg.cancel_scope.cancel()

    async def _end_of_stream(self) -> None:
        for t in self.analyzer.finish(self.now()):
            await self._publish(Transitioned(self.spec.name, t))
        inc = self.analyzer.lifecycle.verdict_incarnation()
        self.concluded = Concluded(self.spec.name, inc.state, self._verdict(inc), self.timed_out)
        await self._publish(self.concluded)

    async def _restore(self, source: Source) -> tuple[int, str | None]:
        # The state of a valid checkpoint, and the offset (and a cursor source's cursor) to read on from; 0
        # without one.
        if self._checkpoints is None:
            if self._numbered_after:  # `watch --compare-with`: numbered after the log compared with
                self.analyzer.lifecycle.number_from(self._numbered_after)
            return self._offset, None
        restored = await self._checkpoints.restore(source, self.analyzer)
        checkpoint = restored.checkpoint
        if checkpoint is None:
            # read from the start: the file's launches numbered as before, or after the last one known
            base = self._numbered_after if restored.base is None else restored.base
            self.analyzer.lifecycle.number_from(base)
            self._checkpoints.base = base
            self._checkpoints.fresh = True
            return 0, None
        self._checkpoints.base = checkpoint.base  # its record is in self.analyzer, with the current deadlines
        # the follower's clock goes on from the checkpoint's (the analyzer's times are on it)
        self._start = self._clock.now() - checkpoint.elapsed
        self._last_data = checkpoint.elapsed
        self.resumed_at = checkpoint.offset
        return checkpoint.offset, checkpoint.cursor

    # -- the source --------------------------------------------------------------------------------------

    async def _item(self, item: object) -> None:
        now = self.now()
        # the log had not grown for a while (before this item): its checkpoint is saved as a quiet log's
        quiet = now - self._last_data >= CHECKPOINT_QUIET
        at = self._run_at
        if isinstance(item, Chunk) and at is not None and item.end > at:
            # a run started here begins at `at`: what came before it is the old run's, what follows a new
            # incarnation's, whatever its engine prints first (not every engine has a start marker)
            self._run_at = None
            if item.offset < at:
                await self._item(Chunk(item.offset, item.data[: at - item.offset], item.file, item.cursor))
                item = Chunk(at, item.data[at - item.offset :], item.file, item.cursor, item.caught_up)
            await self._apply(self.analyzer.restart(now))
        if isinstance(item, Chunk):
            transitions = self._fed(item, now)
            if self._checkpoints is not None and self._checkpoints.fresh:
                # a file's first bytes: saved before their transitions are stored
                with anyio.move_on_after(FRESH_SAVE_WAIT):
                    await self._checkpoints.save_now(self.analyzer, self.now)
            if await self._after_feed(item, transitions, quiet):
                return
            quiet = quiet and not item.caught_up  # the log just grew
        elif isinstance(item, _Fed):  # a pushed chunk whose transitions are left to apply (`_push`)
            if await self._after_feed(item.chunk, item.transitions, item.quiet):
                return
            quiet = False
        elif isinstance(item, CaughtUp):
            if await self._end_of_read(now):
                return
        elif isinstance(item, FileRestarted):
            await self._note("file", f"{item.reason}: reading the new file from its start")
            transitions = self.analyzer.restart(now)
            if self._checkpoints is not None:
                self._checkpoints.restarted()
                # the new file's launches come after the old file's (its last one, if the restart began another)
                self._checkpoints.base = self.analyzer.lifecycle.current.number - 1
                # published with the new file's first bytes, once they are checkpointed (see `fresh`)
                self._deferred += transitions
                self._reschedule(transitioned=bool(transitions))
                return
            await self._apply(transitions)
        elif isinstance(item, FileMissing):
            if self._missing is None:
                self._missing = (str(item.path), now, time.time())
            await self._note("filemissing", f"{item.path} does not exist (yet): waiting for it")
            await self._apply(self.analyzer.probe(LogMissing(), now))
            self._caught_up = True
        elif isinstance(item, Ended):
            await self._note("ended", str(item))
            # the stream is over: what its last lines say (a traceback cut short) is read before the exit
            transitions = self.analyzer.stream_ended(now)
            exited = ProcessExited(
                item.detail,
                exit_code=item.exit_code,
                oom_killed=item.oom_killed,
                memory_limit=item.memory_limit,
            )
            if self._stop_reason is not None:  # the end a stop asked for (`docker stop`): not a crash
                exited = ProcessExited(self._stop_reason, exit_code=0)
            await self._apply(transitions + self.analyzer.probe(exited, now))
        elif isinstance(item, Disconnected):
            await self._note("disconnected", str(item), since=item.since)
        elif isinstance(item, Connected):
            await self._note("connected", str(item))
        if self._checkpoints is not None:
            self._checkpoints.save_due(self.analyzer, self.now, self._tg.start_soon, quiet=quiet)

    def _fed(self, item: Chunk, now: float) -> list[Transition]:
        # A chunk's bytes, fed to the analyzer (and the checkpoint's windows): its transitions, not yet applied.
        self._at_end = False
        self._last_data = now
        self._missing = None
        # Unix time, not the follower's clock: it is compared with time()
        self.last_activity = time.time()
        transitions = self.analyzer.feed(item.data, now)
        if not self._prepared and self._caught_up and self.analyzer.profile is not None:
            self._prepare_soon()  # a live log's engine, just detected
        if self._checkpoints is not None:
            self._checkpoints.fed(item.data, item.file, item.cursor)
        return transitions

    async def _after_feed(self, item: Chunk, transitions: list[Transition], quiet: bool) -> bool:
        # What follows a chunk's feed: its transitions applied, and, for a chunk that ends its read (`Merges`), the
        # end of the read. True: `_item` is done (the read's end was handled).
        if transitions or self._deferred or self._awaiting_ready:
            await self._apply(transitions)
        else:
            self._reschedule()  # `_apply` of nothing: only whether a tick is due sooner now
        if not item.caught_up:
            return False
        # the read's CaughtUp, come with its chunk (`Merges`): handled as if it were the next item
        if self._checkpoints is not None:
            self._checkpoints.save_due(self.analyzer, self.now, self._tg.start_soon, quiet=quiet)
        if self._usual_end():
            self._at_end = True  # `_end_of_read`'s usual end, which changes nothing
            return True
        # its own time, as an item of its own would have had (a first chunk's save may have waited)
        return await self._end_of_read(self.now())

    def _push(self, item: SourceItem) -> object:
        # `Pushes`: a live read (a chunk that ends it, the log already read whole) taken outside the follower's task,
        # in the event loop's pass over every file that changed, when nothing of it needs to wait (no transition
        # to publish, nothing to save at once): as `_item` would take it. Else what is left goes to `_item`.
        cp = self._checkpoints
        if (
            type(item) is not Chunk
            or not item.caught_up
            or self._run_at is not None
            or not self._caught_up
            or self._deferred
            or self._awaiting_ready
            or (cp is not None and cp.fresh)
        ):
            return item
        now = self.now()
        quiet = now - self._last_data >= CHECKPOINT_QUIET
        transitions = self._fed(item, now)
        if transitions or not self._usual_end():
            return _Fed(item, transitions, quiet)
        self._reschedule()
        if cp is not None:
            cp.save_due(self.analyzer, self.now, self._tg.start_soon, quiet=quiet)
        self._at_end = True
        return None

    def _usual_end(self) -> bool:
        # `_end_of_read` would change nothing and return True: the analyzer already judged the log whole and knows
        # its engine, so being at the end changes nothing in it, nor what is due when (the chunk's own `_apply`
        # asked that); nothing to save that was not due a moment ago either; no crash's tracebacks to report
        return (
            self._whole
            and self.analyzer.profile is not None
            and not self._deferred
            and not self._awaiting_ready
            and not self._crash_reported()
        )

    async def _end_of_read(self, now: float) -> bool:
        # The source is at the end of the log (a CaughtUp, or a chunk that is one). True: the usual end of a read,
        # which changes nothing (nothing to save either).
        self._at_end = True
        if (
            self._whole
            and self.analyzer.profile is not None
            and not self._deferred
            and not self._awaiting_ready
        ):
            # the end of a read (the usual item after each chunk): see `_usual_end`; a crash reported has its
            # tracebacks, grown since, reported as far as they go
            if self._crash_reported():
                await self._apply(self.analyzer.report_open_tracebacks(now))
            return True
        self._whole = True
        # the first time: how long the log had been quiet already (its file's age, where the source tells it)
        aged = self._aged if not self._caught_up else None
        quiet_for = aged.unmodified_for() if aged is not None else None
        transitions = self.analyzer.caught_up(now, quiet_for=quiet_for or 0.0)
        if self._deferred and self._checkpoints is not None:
            # a restart onto an empty file (truncated): its offset 0 checkpointed before its new start is
            # stored, as its first bytes would be
            with anyio.move_on_after(FRESH_SAVE_WAIT):
                await self._checkpoints.save_now(self.analyzer, self.now)
            self._checkpoints.fresh = True  # and again with its first bytes
        first = not self._caught_up
        self._caught_up = True
        await self._apply(transitions, judge=not first)
        if first:
            await self._judge_whole()
            if (
                self.analyzer.profile is not None
                and self.analyzer.lifecycle.verdict_incarnation().state not in VERDICTS
            ):
                # no verdict in what the log held: its first error, later, finds its rules made
                self._prepare_soon()
        elif self._crash_reported():
            # the crash is reported; a traceback still open when it went out has grown: its frames
            # (which may tell the crash's phase) are taken as far as they go, as at the end of a replay
            await self._apply(self.analyzer.report_open_tracebacks(now))
        return False

    def _prepare_soon(self) -> None:
        self._prepared = True
        self._tg.start_soon(self._prepare)

    async def _prepare(self) -> None:
        # What the log's first error would make on its way to the verdict (`Analyzer.prepare`: the engine's category
        # regexes, 30 to 60 ms of CPU, and its rule sets of a server up or down), made as soon as its engine is
        # known, in a worker thread: the error would make them in the event loop, where the other launches and
        # the HTTP server wait. What it makes is shared by every launch of the engine, so one launch of the process
        # makes it (`_PREPARED`); the analyzer's state is not touched (the loop goes on feeding it meanwhile).
        profile = self.analyzer.profile
        if profile is None or id(profile) in _PREPARED:
            return
        _PREPARED[id(profile)] = profile
        await anyio.to_thread.run_sync(_exhaust, self.analyzer.prepare())

    async def _publish(self, update: Update) -> None:
        # To the listener, if one was given (`listen`). Else put on `updates` at once while the buffer has room: the
        # stream's `send` first yields to the event loop (a pass of the loop for each of a relaunch's eight
        # updates). A full buffer is waited for, and a reader gone is said, as `send` does: after that yield, where
        # a follower cancelled with its reader (`watch` done with its verdict) is cancelled, not failed
        listener = self._listener
        if listener is not None:
            listener(update)
            return
        try:
            self._send.send_nowait(update)
        except (anyio.WouldBlock, anyio.BrokenResourceError):
            await self._send.send(update)

    async def _note(self, kind: str, detail: str, *, since: float | None = None) -> None:
        await self._publish(SourceNoted(self.spec.name, kind, detail, since))

    # -- verdicts ----------------------------------------------------------------------------------------

    def _crash_reported(self) -> bool:
        current = self.analyzer.lifecycle.current
        return (
            current.state is _CRASHED
            and current.number not in self._settling
            and self.concluded is not None
            and self.concluded.verdict.incarnation == current.number
        )

    async def _apply(self, transitions: list[Transition], *, judge: bool = True) -> None:
        if self._deferred:
            transitions, self._deferred = self._deferred + transitions, []
        self._reschedule(transitioned=bool(transitions))
        if transitions and self._checkpoints is not None:
            self._checkpoints.transitioned()
        for t in transitions:
            await self._publish(Transitioned(self.spec.name, t))
            if judge and self._caught_up:
                await self._judge(t.state, t.incarnation)
        if self._awaiting_ready:
            await self._judge_whole()

    async def _judge_whole(self) -> None:
        # What the log held when the follower caught up, judged as replay judges a whole file.
        inc = self.analyzer.lifecycle.verdict_incarnation()
        self._awaiting_ready = inc.state == State.READY and inc.pending_since is not None
        if not self._awaiting_ready and inc.state in VERDICTS:
            await self._judge(inc.state, inc.number)

    async def _judge(self, state: State, number: int) -> None:
        if state == State.CRASHED:
            if number not in self._settling:
                self._settling.add(number)
                self._tg.start_soon(self._settle, number)
        elif state == State.READY and self._incarnation(number).ready_unconfirmed is not None:
            if number not in self._confirming:
                self._confirming.add(number)
                self._tg.start_soon(self._confirm_ready, number)
        elif state in VERDICTS:
            await self._conclude(state, number)

    async def _confirm_ready(self, number: int) -> None:
        # Ready from an early line: the verdict waits for the server to accept connections, or for long enough.
        inc = self._incarnation(number)
        while inc.ready_unconfirmed is not None and inc.state == State.READY:
            waited = self.now() - inc.ready_unconfirmed
            limit = READY_CONFIRM_DUE if inc.ready_confirm_due else READY_CONFIRM
            if waited >= limit:
                break
            # at least a millisecond: a wait of a rounding error would wake at the same time forever
            await self._clock.sleep(max(0.001, min(self.spec.tick, limit - waited)))
        self._confirming.discard(number)
        if inc.state == State.READY:
            await self._conclude(State.READY, number)

    async def _settle(self, number: int) -> None:
        # The crash is known; its report waits for the other ranks, or until the log is quiet.
        spec = self.spec
        first = self.now()
        while True:
            now = self.now()
            waited = now - first
            if self.analyzer.traceback_open and waited < TRACEBACK_WAIT:
                # a traceback is still being written (its exception line, which names the crash, may come over
                # SSH a few hundred ms later): the report waits for it to close, or for TRACEBACK_WAIT
                await self._clock.sleep(max(min(TRACEBACK_WAIT - waited, spec.quiet or spec.settle), 0.001))
                continue
            if waited >= spec.settle:
                break
            quiet_for = now - self._last_data
            # a crash told by a wrapper ("Worker proc ... died", "see root cause above") waits the whole window
            # for what it points at: another process's report of the same failure comes ~0.1 s later
            error = self._incarnation(number).error
            if self._at_end and quiet_for >= spec.quiet and not (error is not None and error.elsewhere):
                break
            # the log may go quiet while this waits: look again every `quiet` seconds at most
            wait = min(spec.settle - (now - first), spec.quiet or spec.settle)
            if self._at_end:
                wait = min(wait, spec.quiet - quiet_for)
            await self._clock.sleep(max(wait, 0.001))
        self._settling.discard(number)
        await self._conclude(State.CRASHED, number)

    async def _conclude(self, state: State, number: int) -> None:
        if state == State.CRASHED:
            # the dying process's open tracebacks are reported as far as they go (their frames count);
            # they stay open, so a writer that paused can still complete them
            for t in self.analyzer.report_open_tracebacks(self.now()):
                await self._publish(Transitioned(self.spec.name, t))
            self._reschedule()
        concluded = Concluded(self.spec.name, state, self._verdict(self._incarnation(number)), self.timed_out)
        if self.concluded is None or number >= self.concluded.verdict.incarnation:
            # the latest verdict is the newest start's: a crash whose report settled after the next start's
            # verdict (a relaunch read in one go, as after a daemon restart) is said, not made the verdict again
            self.concluded = concluded
        await self._publish(concluded)

    def _verdict(self, inc: Incarnation, *, changes: bool = True) -> Verdict:
        v = build_verdict(
            self.analyzer,
            inc,
            earlier=self._earlier,
            command=self._command,
            changes=changes,
            remembered=self._remembered,
        ).with_facts(self._trend.facts())
        if v.missing_log is not None and self._missing is not None:
            path, found, at = self._missing
            missing = MissingLog(v.missing_log.overdue, path, at, max(0.0, self.now() - found))
            v = replace(v, missing_log=missing)
        if v.timed_out != self.timed_out:  # `watch --timeout` ran out (a copy of the verdict made only then)
            v = replace(v, timed_out=self.timed_out)
        return v.redacted(remembered=self._remembered)

    def _incarnation(self, number: int) -> Incarnation:
        lc = self.analyzer.lifecycle
        if lc.current.number == number:
            return lc.current
        return next((h for h in lc.history if h.number == number), lc.current)

    def _verdict_incarnation(self) -> Incarnation:
        if self.concluded is not None:
            return self._incarnation(self.concluded.verdict.incarnation)
        return self.analyzer.lifecycle.verdict_incarnation()

    # -- the clock and the probes ------------------------------------------------------------------------

    async def _ticks(self) -> None:
        # Ticks fall on a grid of `spec.tick` seconds, but only those at or after the next thing due are run:
        # a quiet launch with no deadline near sleeps instead of waking 4 times a second. What brings a
        # deadline nearer (an error, a new incarnation, a transition to save) wakes it early (`_reschedule`).
        spec = self.spec
        loop = asyncio.get_running_loop()
        origin, ticked, last_tick = self.now(), 0, -math.inf
        while True:
            now = self.now()
            due = self._due()
            cp = self._checkpoints
            if cp is not None and cp.dirty:
                # A checkpoint is saved after a chunk when it is due; after the log's last chunk, by a tick once the
                # log is quiet and the save is due (not one a second until then); with nothing to save, no tick is
                # needed for it. A log found still growing at a tick is looked at again no sooner than its quiet
                # could be CHECKPOINT_SLACK old (`_look_again`: a log that grows for minutes, a crash loop's, wakes
                # the task every 7 s for it, not every 3).
                save = max(
                    self._last_data + CHECKPOINT_QUIET,
                    last_tick + CHECKPOINT_QUIET,
                    self._look_again,
                    self._save_at(),
                )
                due = save if due is None else min(due, save)
            k = max(ticked + 1, math.floor((now - origin) / spec.tick) + 1)
            if due is not None:
                k = max(k, math.ceil((due - origin) / spec.tick))
            self._wake_at = origin + k * spec.tick if due is not None else math.inf
            # a future, not a cancel scope: waking the task early is this launch's most frequent wake-up
            wake = self._tick_wake = loop.create_future()
            if due is None:
                await wake
            else:
                await self._clock.sleep(self._wake_at - now, wake)
            self._tick_wake = None
            if wake.done() and wake.result() is True:
                continue  # rescheduled: something is due sooner
            ticked = k
            now = last_tick = self.now()
            await self._apply(self.analyzer.tick(now))
            if cp is not None:
                quiet = now - self._last_data >= CHECKPOINT_QUIET
                cp.save_due(self.analyzer, self.now, self._tg.start_soon, quiet=quiet)
                if not quiet:
                    self._look_again = now + CHECKPOINT_SLACK - CHECKPOINT_QUIET
            if spec.timeout is not None and now >= spec.timeout and not self.timed_out:
                self.timed_out = True
                inc = self._verdict_incarnation()
                await self._conclude(inc.state, inc.number)

    def _due(self) -> float | None:
        # the earliest time a tick may change the verdict (see `Analyzer.next_due`), on the follower's clock
        due = self.analyzer.next_due()
        if self.spec.timeout is not None and not self.timed_out:
            due = self.spec.timeout if due is None else min(due, self.spec.timeout)
        return due

    def _save_at(self) -> float:
        # when a quiet log's checkpoint is due (`Checkpointer.next_save`), on the follower's clock
        assert self._checkpoints is not None
        return self._checkpoints.next_save() - self._clock.now() + self.now()

    def _reschedule(self, *, transitioned: bool = False) -> None:
        # the analyzer changed: if a tick is due before the one the clock task sleeps for, wake it (called after
        # every chunk: what cannot wake it is not reckoned)
        wake_at = self._wake_at
        if self._tick_wake is None or wake_at == -math.inf:
            return  # the clock task is not asleep (it reckons what is due before it sleeps), or was woken already
        due = self.analyzer.next_due()  # `_due`, inline (each chunk)
        if self.spec.timeout is not None and not self.timed_out:
            due = self.spec.timeout if due is None else min(due, self.spec.timeout)
        cp = self._checkpoints
        if cp is not None and (transitioned or cp.dirty):
            # a transition's checkpoint is saved soon; other changes' within CHECKPOINT_SLACK of the quiet; not
            # before the save is due (`_save_at`), which is asked only where the save could come first
            save = (
                max(self.now() + CHECKPOINT_QUIET, self._look_again)
                if transitioned
                else self._last_data + CHECKPOINT_SLACK
            )
            if save < wake_at and (due is None or save < due):
                save = max(save, self._save_at())
                due = save if due is None else min(due, save)
        if due is not None and due < wake_at:
            self._wake_at = -math.inf  # once
            wake_up(self._tick_wake, True)

    def _start_probes(self, tg: anyio.abc.TaskGroup) -> None:
        spec = self.spec
        if spec.pid is not None or spec.process or spec.pid_file:
            self._probe = self._process_probe()
            self._watching = True
            tg.start_soon(self._process, self._probe)
        if spec.health_url:
            tg.start_soon(self._health)
        if spec.gpu:
            tg.start_soon(self._gpu)

    def _process_probe(self) -> Any:
        spec, target = self.spec, self.spec.target
        from watchdog.follow.probes.process import LocalProcessProbe, SSHProcessProbe  # noqa: PLC0415

        if target.host is None:
            return LocalProcessProbe(pid=spec.pid, pattern=spec.process or None, pid_file=spec.pid_file)
        if self._pool is None:
            raise ValueError("a remote launch needs an SSH pool")
        return SSHProcessProbe(
            self._pool,
            target.host,
            port=target.port,
            user=target.user,
            pid=spec.pid,
            pattern=spec.process or None,
            pid_file=spec.pid_file,
        )

    def expect_run_at(self, offset: int | None) -> None:
        """A run is being started (`watchdog start`) whose output begins at byte `offset` of the log (its size
        before the start): the bytes from there on are a new incarnation (None: the start failed after all)."""
        self._run_at = offset

    def process_started(self) -> None:
        """A new run of the launch's process was started (`watchdog start`): its end is watched again (the
        process probe ends with the process it saw), and is a crash unless a stop is asked again."""
        self._stop_reason = None
        self._runs += 1
        if self._probe is not None and not self._watching:
            self._watching = True
            self._tg.start_soon(self._process, self._probe)

    async def _process(self, probe: Any) -> None:
        try:
            while await self._process_watch(probe):
                pass  # what ended was the run before a new one `watchdog start` started: that one is watched
        finally:
            self._watching = False

    async def _process_watch(self, probe: Any) -> bool:
        # True: the process that ended was a run before the one that runs now (a replace): watch on
        from watchdog.follow.probes.process import must_appear, wait_until_gone  # noqa: PLC0415

        runs = self._runs

        spec = self.spec
        named = f"matching {spec.process!r}" if spec.process else f"whose pid is in {spec.pid_file}"

        async def waiting(now_waiting: bool) -> None:
            # a process not started yet is pending, not dead: said once, and again when it shows up
            if now_waiting:
                await self._note("process", f"waiting for a process {named} to start")
            else:
                await self._note("process", f"a process {named} is running")

        await wait_until_gone(probe, interval=spec.probe_interval, appear=must_appear(probe), waiting=waiting)
        # let the last lines (a traceback being written) arrive before the verdict
        await self._clock.sleep(self.spec.tick * 2)
        if self._runs != runs and await self._still_running(probe):
            return True  # a run started meanwhile (its end, if stopped, was said by `stopped`)
        if self._stop_reason is not None:
            await self.stopped(self._stop_reason)
        else:
            await self._apply(self.analyzer.probe(ProcessExited("no such process"), self.now()))
        return False

    async def _still_running(self, probe: Any) -> bool:
        try:
            return bool(await probe.alive())
        except ConnectionLost:
            return True  # unknown: not a death to report

    def expect_stop(self, reason: str) -> None:
        """The process is being stopped on purpose (`watchdog stop`): its end is `stopped`, not a crash."""
        self._stop_reason = reason

    async def stopped(self, reason: str) -> None:
        """The process was stopped on purpose and is gone: the launch is `stopped` (an error already being
        judged, or a verdict already given, stands)."""
        self._stop_reason = reason
        await self._apply(self.analyzer.probe(ProcessExited(reason, exit_code=0), self.now()))

    async def _health(self) -> None:
        from watchdog.follow.probes.health import HealthProbe  # noqa: PLC0415

        target, url = self.spec.target, self.spec.health_url
        assert url is not None
        pool = self._pool if target.host else None
        async with HealthProbe(url, pool=pool, host=target.host, port=target.port, user=target.user) as probe:
            while True:
                await self._clock.sleep(self.spec.probe_interval)
                if not self.analyzer.lifecycle.wants_health():
                    continue
                try:
                    status = await probe.check()
                except ConnectionLost:
                    continue  # unknown, not unhealthy
                await self._apply(self.analyzer.probe(HealthChecked(status), self.now()))

    async def _gpu(self) -> None:
        from watchdog.follow.probes.gpusampler import HostGpuSampler, LaunchMemoryTrend  # noqa: PLC0415

        if self._gpu_sampler is not None:
            # the host's sampler paces the readings; this launch sees only its own processes' memory
            mine = self._trend = LaunchMemoryTrend()
            with self._gpu_sampler.subscribe(pid=self.spec.pid, pattern=self.spec.process) as feed:
                async for sample in feed:
                    if sample.used_bytes is not None:
                        growing = mine.observe(self.now(), sample)
                        await self._apply(self.analyzer.probe(GpuMemorySampled(growing), self.now()))
            return
        # `watch`: a sampler of its own, host-wide (every GPU of the host; memory per GPU among the facts)
        target = self.spec.target
        sampler = HostGpuSampler(
            pool=self._pool if target.host else None,
            host=target.host,
            port=target.port,
            user=target.user,
            interval=self.spec.gpu_interval,
            clock=self._clock,
        )
        trend = self._trend = MemoryTrend()
        with sampler.subscribe_host() as gpus:
            async for samples in gpus:
                growing = trend.observe(self.now(), samples)
                await self._apply(self.analyzer.probe(GpuMemorySampled(growing), self.now()))


# The profiles whose pieces a follower of this process makes or made (`_prepare`), by identity (each kept here, so
# that its id names no later profile). At a daemon's start its launches detect their engines within a second: each
# making the same regexes in a worker thread of its own (anyio's 40 at once) took the GIL from the event loop for
# 50 ms (a CI run's slow callback), and the CPU of the start forty times over.
_PREPARED: dict[int, Profile] = {}


def _exhaust(steps: Iterator[None]) -> None:
    # every step of a generator, run through (in a worker thread)
    for _ in steps:
        pass
