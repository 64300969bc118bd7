"""Lifecycle: the launch state machine, (state, event or tick, now) -> transitions (pure, time is an argument).

Startup phases only move forward. An error is *pending* until progress follows it (survived) or it becomes a
crash: `crash_grace` without progress (before ready only), the end of the log, or a fatal line. After ready,
an error is a crash only on evidence that the server stopped serving (a fatal line, the process gone, the
health endpoint failing, or the end of the log with nothing served after it); a request answered (`served`
rules: a status below 500, or a batch run) or `POST_READY_RECOVERY_LINES` healthy lines show it was one
request's error: it is counted (facts `request_errors`, `last_request_error`), never a crash. A new start
marker begins a new incarnation; `history` keeps the last `PAST_INCARNATIONS_HELD`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from watchdog.core.arguments import Argument
from watchdog.core.arguments import merge as merge_arguments
from watchdog.core.categories import categorize
from watchdog.core.durations import Seen, duration
from watchdog.core.findings import (
    ArgumentsFound,
    DyingWords,
    ErrorSeen,
    Event,
    FactFound,
    GpuMemorySampled,
    HealthChecked,
    LaunchStarted,
    LinesRead,
    LogMissing,
    PhaseReached,
    ProcessExited,
    ProgressMade,
    ReadyReached,
    RequestServed,
    ServingSeen,
    StopSeen,
)
from watchdog.core.rootcause import Candidate, Error, root_cause
from watchdog.core.serving import Serving
from watchdog.profiles.model import Profile
from watchdog.vocabulary import (
    DEADLINE_STATES,
    DEFAULT_CRASH_GRACE,
    DEFAULT_HANG_AFTER,
    FATAL_WHEN_LOGGED,
    FATAL_WHILE_STARTING,
    PAST_INCARNATIONS_HELD,
    PROGRESS_STATES,
    STARTUP_PHASES,
    TERMINAL_STATES,
    UNBEGUN_STATES,
    Category,
    State,
    format_duration,
)

__all__ = ["LAST_REQUEST_ERROR", "REQUEST_ERRORS", "Incarnation", "Lifecycle", "State", "Transition"]

_MAX_LATE_CANDIDATES = 500
POST_READY_RECOVERY_LINES = 50  # healthy log lines after a post-ready error that show it was survived
# The facts of the errors after ready that the server served on (one request's each): how many, and the last.
REQUEST_ERRORS = "request_errors"
LAST_REQUEST_ERROR = "last_request_error"


_ORDER = {s: i for i, s in enumerate(State)}
# (`_choose` and a line's `feed` compare with them: a member looked up on its class costs a metaclass lookup)
_READY = State.READY
_STALLED = State.STALLED
# past incarnations that keep their arguments: a verdict compares an incarnation with the one before it (the
# newest past ones); an older one's dump (SGLang's: ~150 arguments, 6 KB) would only weigh on every checkpoint
_ARGUMENTS_KEPT = 4
_PHASES = {s.value: s for s in PROGRESS_STATES}


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of state."""

    state: State
    previous: State
    line: int | None  # the log line that caused it, None for a tick or probe
    at: str | None  # the log's time of that line
    now: float  # the caller's clock when it happened
    reason: str = ""
    incarnation: int = 1  # the incarnation whose state changed

    def to_json(self) -> dict[str, object]:
        """A timeline entry of the JSON contract."""
        return {"state": self.state.value, "line": self.line, "at": self.at}


@dataclass(slots=True, weakref_slot=True)  # weakly held by what is remembered of it (`verdict._baseline`)
class Incarnation:
    """One start of the server in the log: its phase history, progress, facts and errors."""

    number: int
    state: State = State.PENDING
    phase: State = State.PENDING  # furthest startup phase (or READY) reached
    timeline: list[tuple[Transition, float | None]] = field(default_factory=list)  # with log seconds
    progress: dict[str, tuple[int, int]] = field(default_factory=dict)
    facts: dict[str, float | str] = field(default_factory=dict)
    arguments: tuple[Argument, ...] = ()  # what the engine's own dump says it was started with
    candidates: list[Candidate] = field(default_factory=list)
    pending_since: float | None = None  # clock time of the first unresolved error
    pending_index: int = 0  # candidates before this index were resolved by later progress
    crash_phase: State | None = None
    error: Error | None = None
    started_now: float | None = None
    last_progress: float | None = None
    ready_seconds: float | None = None  # seconds from start to ready (`duration`)
    lines: int = 0
    healthy_after_error: int = 0  # healthy lines since the last error (see POST_READY_RECOVERY_LINES)
    ready_unconfirmed: float | None = None  # when an early ready line (ReadyReached.early) came, unconfirmed
    # the line that confirms an early ready line is sure to come (ReadyReached.confirm_due): a longer wait for it
    ready_confirm_due: bool = False
    from_start: bool = False  # its log shows the engine's start marker: nothing of it was cut off before
    # A post-ready error that was already in the log when the follower caught up with it: judged as replay
    # would, so the clock confirms it (see `Lifecycle.caught_up`).
    judge_by_clock: bool = False
    deadline_hit: set[State] = field(default_factory=set)  # phases that ran past their deadline
    log_missing: bool = False  # its log does not exist (yet): a launch that never started, or a wrong path
    # The timeline index from which the follower saw its entries as they came, on one continuous clock (None:
    # none of them: a replay, or the log as it was when the follow began): their clock times measure durations.
    live_from: int | None = None
    serving: Serving = field(default_factory=Serving)  # its requests once ready, and a serving hang's clock
    # lines of the interpreter's exit noise (`[[dying]]` rules printed at a clean exit too) read, and the last
    # one's number: a log of nothing else tells a process's end, not how it ended
    exit_noise: int = 0
    exit_noise_line: int = 0

    def duration(self, start: int, end: int) -> float | None:
        """Seconds from timeline entry `start` to entry `end`: the one sane value (`durations.duration`)."""
        (t0, log0), (t1, log1) = self.timeline[start], self.timeline[end]
        if self.live_from is None or end < self.live_from:
            seen = Seen.NONE
        else:
            seen = Seen.LIVE if start >= self.live_from else Seen.END_LIVE
        return duration(log0, log1, t0.now, t1.now, seen)


class Lifecycle:
    """The state machine of one launch; feed it events and ticks, read `current` and `history`."""

    def __init__(
        self,
        engine: str = "generic",
        *,
        stall_after: float | None = None,
        crash_grace: float = DEFAULT_CRASH_GRACE,
        deadlines: Mapping[str, float] | None = None,
        hang_after: float | None = DEFAULT_HANG_AFTER,
    ) -> None:
        self.engine = engine
        self.profile = Profile(engine)  # what the engine's tracebacks tell, and its hints (the analyzer's)
        self.stall_after = stall_after
        # requests running or waiting with no token for this long, once ready, is a serving hang (None: off)
        self.hang_after = hang_after
        # the longest a launch may spend in a phase, by phase name: past it, it is stalled (once per phase)
        self.deadlines = dict(deadlines or {})
        self.crash_grace = crash_grace
        self.current = Incarnation(1)
        self.history: list[Incarnation] = []
        # the follower has read the log as it was (`caught_up`): from then on it sees each line as it comes
        self.live = False
        self.memory_growing = False  # GpuMemorySampled: a quiet phase that fills memory is not stalled
        # the incarnation whose KV-cache step is under way after torch.compile's lines (vLLM V1's profile run);
        # not part of a resume record: a follower resumed in that step says capturing_graphs for a crash in it
        self._kv_step_of: int | None = None
        # Whether a health 200 may confirm ready in a log with no phase marker (--log-level warning). Not for
        # engines whose health endpoint answers before they can serve (SGLang): profile `early_health`.
        self.trust_silent_health = True
        # Whether a 200 is ready in any startup phase: the engine's health endpoint answers only once it can
        # serve (profile `health_means_ready`: vLLM, llama.cpp, TGI)
        self.health_means_ready = False
        # the last root-cause choice and what it was made from (`_choose`); not part of a resume record
        self._chosen: _Choice | None = None
        # Set by a caller that feeds the events of a block of lines and then reads `settle`'s result: a crash's
        # root cause after ready is then chosen once, at `settle`, from the errors of the whole block, not again
        # at each of them (the wrapper line, then its traceback; each of eight ranks' copies). Not recorded.
        self.defer_choice = False
        self._deferred: _Deferred | None = None  # the choice put off until `settle`

    def number_from(self, last: int) -> None:
        """Number this log's launches after `last` (the launch's earlier logs' incarnations, which the daemon
        keeps): before any event, the first one is `last + 1`."""
        if self.history or self.current.timeline:
            raise ValueError("incarnations are numbered before the first event")
        self.current.number = last + 1

    @property
    def state(self) -> State:
        """The current incarnation's state."""
        return self.current.state

    def verdict_incarnation(self) -> Incarnation:
        """The incarnation a verdict reports: the current one, unless it is a restart that has only just begun
        after a crash (a crash loop: the restarted server says nothing yet, the crash is the news)."""
        inc = self.current
        if (
            inc.state == State.STARTING
            and not inc.candidates
            and self.history
            and self.history[-1].state == State.CRASHED
        ):
            return self.history[-1]
        return inc

    def feed(self, event: Event, now: float) -> list[Transition]:
        """Apply one event at clock time `now`; return the transitions it caused."""
        inc = self.current
        out: list[Transition] = []
        if inc.started_now is None:
            inc.started_now = now
            inc.last_progress = now
        if isinstance(event, LinesRead):  # first: one per block of lines read, the most frequent
            inc.log_missing = False
            inc.lines += event.count
            if inc.pending_since is not None and inc.phase is _READY and inc.state not in TERMINAL_STATES:
                # A server that goes on serving after an error has survived it (a failed request, logged);
                # only healthy lines after the error count, and only once it was ready.
                inc.healthy_after_error += event.healthy_tail
                if inc.healthy_after_error >= POST_READY_RECOVERY_LINES:
                    self._served_on(inc)
            if event.active:
                # healthy lines count against a stall (not against an error)
                inc.last_progress = now
                if inc.state is _STALLED and not inc.serving.hung:  # a hang's lines go on: no end of it
                    self._enter(
                        inc, inc.phase, None, None, None, now, "log activity resumed", out, record_phase=False
                    )
        elif isinstance(event, ServingSeen):  # second: a busy server's batch lines
            self._serving(inc, event, now, out)
        elif isinstance(event, LaunchStarted):
            inc.log_missing = False
            if inc.pending_since is not None and inc.state not in TERMINAL_STATES:
                # the server started again: the error before it was fatal to the previous run
                self._crash(inc, now, out, None, None, reason="restarted after an error")
            waited = inc.state == State.STALLED and inc.phase == State.PENDING  # for a log that was missing
            if (_ORDER[inc.state] > _ORDER[State.STARTING] and not waited) or inc.candidates:
                self._retire(inc)
                inc = self.current = Incarnation(inc.number + 1, started_now=now, last_progress=now)
                inc.live_from = 0 if self.live else None
            inc.from_start = inc.from_start or event.marker
            self._enter(inc, State.STARTING, event.line, event.at, event.seconds, now, "launch started", out)
        elif isinstance(event, PhaseReached):
            target = _PHASES[event.state]
            if event.progress:
                self._progress(inc, now, out, event.line, event.source)
            if inc.state in TERMINAL_STATES:
                return out
            if _ORDER[target] > _ORDER[inc.phase] and inc.phase != State.READY:
                self._enter(inc, target, event.line, event.at, event.seconds, now, "phase marker", out)
            if target == State.CAPTURING_GRAPHS:
                self._kv_step_of = None
            elif (
                target == State.ALLOCATING_KV_CACHE
                and inc.phase == State.CAPTURING_GRAPHS
                and not _captured(inc)
            ):
                # vLLM V1 compiles the model (torch.compile's markers: capturing_graphs) inside the profiling run
                # that sizes the KV cache: a KV-cache line after them, before any graph is captured, says the step
                # under way is the KV cache's. The phase reached stays; a crash now is in allocating_kv_cache.
                self._kv_step_of = inc.number
        elif isinstance(event, ProgressMade):
            if event.name == "graphs":
                self._kv_step_of = None  # graph capture itself has begun
            old = inc.progress.get(event.name)
            inc.progress[event.name] = (event.done, event.total)
            if old != (event.done, event.total):
                self._progress(inc, now, out, event.line, event.source)
        elif isinstance(event, FactFound):
            inc.facts[event.name] = event.value
        elif isinstance(event, ArgumentsFound):
            arguments = merge_arguments(inc.arguments, event.arguments)
            # A crash loop's relaunch dumps the arguments of the start before: held once, the tuple before's
            # (a checkpoint's writer keeps one text of it, not one a past incarnation: SGLang's is 6 KB)
            before = self.history[-1].arguments if self.history else ()
            inc.arguments = before if arguments == before else arguments
        elif isinstance(event, ReadyReached):
            if event.confirm_due and not event.early:
                # the HTTP server began its startup (Uvicorn's lifespan): the line that says it is done (or failed)
                # comes next, and an early ready line's verdict waits for it; no ready line itself
                inc.ready_confirm_due = True
                if inc.ready_unconfirmed is not None:
                    inc.ready_unconfirmed = now
                return out
            # an early line sure to be confirmed (the server's own path), or else the usual wait from here
            inc.ready_confirm_due = event.confirm_due
            if not event.early:
                inc.ready_unconfirmed = None  # the server accepts connections now
            elif inc.ready_unconfirmed is not None and inc.phase == State.READY:
                # a later early line (vLLM's "Supported tasks", then "Starting vLLM server on", then "Available
                # routes are"): the server is a step nearer to listening, the wait for Uvicorn starts again
                inc.ready_unconfirmed = now
            if inc.state == State.STOPPED and inc.phase != State.READY and not event.early:
                # a request answered after a stop that came before any ready line: the server was serving (an
                # excerpt that begins at Uvicorn's 'Shutting down', the requests in flight answered as it drains)
                inc.phase = State.READY
            if inc.state in TERMINAL_STATES or inc.phase == State.READY:
                return out  # a later ready line (one that confirms an early one) is no progress
            self._progress(inc, now, out, event.line, None)
            inc.ready_unconfirmed = now if event.early else None
            self._enter(inc, State.READY, event.line, event.at, event.seconds, now, "ready marker", out)
            if len(inc.timeline) > 1 and inc.timeline[-1][0].state == State.READY:
                # by the log's times when they are sane, else the follower's clock (`Incarnation.duration`)
                inc.ready_seconds = inc.duration(0, len(inc.timeline) - 1)
        elif isinstance(event, ErrorSeen):
            self._error(inc, event.candidate, now, out)
        elif isinstance(event, RequestServed):
            if inc.phase == State.READY:
                inc.ready_unconfirmed = None  # it answered a request: it accepts connections
            elif self._answered_in_excerpt(inc, event):
                # an excerpt that begins while the server serves, nothing of its start shown: a request answered
                # (not with a 5xx, which a dead engine's HTTP server gives too) says it serves
                self._progress(inc, now, out, event.line, None)
                self._enter(inc, State.READY, event.line, None, None, now, "a request was answered", out)
            # A request answered after an error (not with a 5xx: an engine that died still has its HTTP server
            # answer 500) or a batch run: the server serves on, the error was one request's.
            if (event.status is None or event.status < 500) and self._judged_by_serving(inc):
                self._served_on(inc)
        elif isinstance(event, GpuMemorySampled):
            self.memory_growing = event.growing
        elif isinstance(event, LogMissing):
            # the clock started above: past `stall_after` it is said, as a log that does not exist (`to_json`)
            inc.log_missing = inc.state in UNBEGUN_STATES and inc.phase == State.PENDING
        elif isinstance(event, DyingWords):
            self._dying(inc, event, now, out)
        elif isinstance(event, StopSeen):
            if (
                inc.state not in TERMINAL_STATES
                and inc.pending_since is None
                and (inc.phase == State.READY or not event.after_ready)
            ):
                self._enter(inc, State.STOPPED, event.line, event.at, None, now, "clean shutdown", out)
        elif isinstance(event, ProcessExited):
            if inc.state in TERMINAL_STATES:
                pass
            elif event.exit_code == 0 and not event.oom_killed and inc.pending_since is None:
                # the platform saw it exit with status 0 and no error is pending: an intended end
                self._enter(inc, State.STOPPED, inc.lines, None, None, now, f"exited ({event.detail})", out)
            else:
                pending = inc.candidates[inc.pending_index :]
                if not pending and event.oom_killed:
                    # the kernel's verdict outranks what the log says last: a killed process prints no reason
                    inc.candidates.append(
                        Candidate(
                            f"process killed for memory: {event.detail}",
                            inc.lines,
                            category=Category.KILLED,
                            kind="rule",
                            fatal=True,
                            hint=_oom_killed_hint(event.memory_limit),
                        )
                    )
                elif not pending and event.last_words is not None:
                    # its last line says why it stopped (a usage error): that, not a kill, is the crash
                    inc.candidates.append(
                        Candidate(
                            event.last_words,
                            event.line or inc.lines,
                            kind="log",
                            fatal=True,
                            hint="the process exited right after this line, its last: it says why",
                        )
                    )
                elif not pending:
                    inc.candidates.append(
                        Candidate(
                            f"process exited: {event.detail}",
                            inc.lines,
                            category=Category.KILLED,
                            kind="rule",
                            fatal=True,
                        )
                    )
                self._crash(inc, now, out, None, None, reason=f"process gone ({event.detail})")
        elif isinstance(event, HealthChecked) and event.status != 200 and self._judged_by_serving(inc):
            # an error after ready, and the server no longer answers its health check: it stopped serving
            answer = "no answer" if event.status is None else f"status {event.status}"
            self._crash(
                inc, now, out, None, None, reason=f"health endpoint failing after an error ({answer})"
            )
        elif (
            isinstance(event, HealthChecked)
            and event.status == 200
            and inc.pending_since is None  # a 200 never hides an error
            and self.wants_health()
        ):
            self._enter(inc, State.READY, None, None, None, now, "health endpoint answered 200", out)
        elif isinstance(event, HealthChecked) and event.status == 200:
            inc.ready_unconfirmed = None  # it answers: it accepts connections
        return out

    def wants_health(self) -> bool:
        """Whether a health answer can decide anything now: weights loaded (or a silent log), not yet ready."""
        inc = self.current
        if self._judged_by_serving(inc):
            return True  # an error after ready: a failing health check says the server stopped serving
        if inc.state not in STARTUP_PHASES:
            return False
        if self.health_means_ready or _ORDER[inc.phase] >= _ORDER[State.ALLOCATING_KV_CACHE]:
            return True
        marked = any(t.state in STARTUP_PHASES[1:] for t, _ in inc.timeline)
        return not marked and self.trust_silent_health

    def tick(self, now: float, *, stall: bool = True) -> list[Transition]:
        """Let time pass: confirm a pending error after the grace period, detect a stall (unless `stall` is
        false: the log went quiet inside a traceback, which is not yet a stall)."""
        inc = self.current
        out: list[Transition] = []
        if inc.state in TERMINAL_STATES or inc.started_now is None:
            return out
        # After ready, quiet is normal (an idle server prints nothing): a logged error is a crash only by a
        # fatal line, the process exiting, or the end of the log, never by the clock.
        judging = inc.pending_since is not None and (inc.phase != State.READY or inc.judge_by_clock)
        if judging and inc.pending_since is not None and now - inc.pending_since >= self.crash_grace:
            if self._requests_only(inc):
                self._served_on(inc)
            else:
                self._crash(inc, now, out, None, None, reason="error with no progress after it")
                return out
        deadline = self.deadlines.get(inc.phase.value)
        if deadline is not None and inc.state == inc.phase and inc.phase not in inc.deadline_hit:
            entered = _entered(inc)
            if entered is not None and now - entered >= deadline:
                inc.deadline_hit.add(inc.phase)
                reason = f"{inc.phase.value} past its deadline ({format_duration(deadline)})"
                self._enter(inc, State.STALLED, None, None, None, now, reason, out)
                return out
        if (
            stall
            and not judging  # an error waits out its grace: with no progress after it, that is a crash
            and self.stall_after is not None
            and inc.state in DEADLINE_STATES
            and inc.last_progress is not None
            and now - inc.last_progress >= self.stall_after
        ):
            if self.memory_growing:
                inc.last_progress = now
            else:
                waited = f"{self.stall_after:g}s"
                reason = f"no log after {waited}" if inc.log_missing else f"no progress for {waited}"
                self._enter(inc, State.STALLED, None, None, None, now, reason, out)
        if self._hang_due(inc) is not None and inc.serving.overdue(now, None, self.hang_after or 0.0):
            self._hang(inc, None, None, None, now, out)
        return out

    def next_due(self) -> float | None:
        """The earliest clock time at which `tick` may change anything (a lower bound), or None: until an
        event comes, no tick can. A caller may skip the ticks before it."""
        inc = self.current
        state = inc.state
        if state in TERMINAL_STATES or inc.started_now is None:
            return None
        due = math.inf
        if inc.pending_since is not None and (inc.phase is not _READY or inc.judge_by_clock):
            due = inc.pending_since + self.crash_grace
        if self.deadlines and state is inc.phase and state not in inc.deadline_hit:
            deadline = self.deadlines.get(state.value)
            entered = _entered(inc)
            if deadline is not None and entered is not None:
                due = min(due, entered + deadline)
        if self.stall_after is not None and state in DEADLINE_STATES and inc.last_progress is not None:
            due = min(due, inc.last_progress + self.stall_after)
        hang = self._hang_due(inc) if inc.serving.open else None  # (none without a request told open)
        if hang is not None:
            due = min(due, hang)
        return due if due != math.inf else None

    def caught_up(self, now: float, *, quiet_for: float = 0.0) -> None:
        """The follower has read what the log held when it started: an error in it after ready is judged as
        replay would judge it (a crash, unless healthy lines or progress show it was survived), by the clock
        (`crash_grace` from now), since an idle server prints nothing more.

        `quiet_for`: the log had not grown for that many seconds when it was read (its file's age). An error
        pending at its end has waited that long already for the progress that would excuse it, as it would have
        had the log been followed as it was written: its `crash_grace` counts from then (a launch that died
        minutes before `watch` started is said crashed at once, not `crash_grace` later). So has an early ready
        line at its end for the line that would confirm it (`ready_unconfirmed`)."""
        inc = self.current
        if inc.pending_since is not None and inc.phase == State.READY and inc.state not in TERMINAL_STATES:
            inc.judge_by_clock = True
            inc.pending_since = now
        if inc.pending_since is not None and inc.state not in TERMINAL_STATES and quiet_for > 0:
            inc.pending_since = min(inc.pending_since, now - quiet_for)
        if inc.ready_unconfirmed is not None and quiet_for > 0:
            # an early ready line, and the log quiet since: the line that would confirm it did not come while
            # nobody followed (Uvicorn at warning level, its stderr not in the log): the wait counts from then
            inc.ready_unconfirmed = min(inc.ready_unconfirmed, now - quiet_for)
        self.live = True
        if inc.live_from is None:
            inc.live_from = len(inc.timeline)

    def date_start(self, at: str | None, seconds: float | None) -> None:
        """The current incarnation began undated (a replaced log: its first line was not read yet): its start
        takes the time of that first line."""
        inc = self.current
        if at is not None and inc.timeline and inc.timeline[0][0].at is None:
            first, _ = inc.timeline[0]
            inc.timeline[0] = (replace(first, at=at), seconds)

    def finish(self, now: float) -> list[Transition]:
        """The log ended and nothing more will come (replay): a pending error is final."""
        inc = self.current
        out: list[Transition] = []
        if inc.pending_since is not None and inc.state not in TERMINAL_STATES:
            if self._requests_only(inc):
                self._served_on(inc)
            else:
                self._crash(inc, now, out, None, None, reason="error at the end of the log")
        inc.ready_unconfirmed = None
        return out

    # -- internals ---------------------------------------------------------------------------------------

    def _serving(self, inc: Incarnation, seen: ServingSeen, now: float, out: list[Transition]) -> None:
        # A serving line of a ready server: a hang's clock starts, runs, or ends (tokens again, no request).
        if inc.phase != State.READY or inc.state in TERMINAL_STATES:
            return  # ready, or stalled once ready
        serving = inc.serving
        resumed = serving.observe(seen, now)
        if resumed is not None and inc.state == State.STALLED and serving.hung:
            serving.hung = False
            inc.last_progress = now
            self._enter(
                inc, State.READY, seen.line, seen.at, seen.seconds, now, resumed, out, record_phase=False
            )
        elif (
            resumed is None
            and inc.state == State.READY
            and self.hang_after is not None
            and serving.overdue(now, seen.seconds, self.hang_after)
        ):
            self._hang(inc, seen.line, seen.at, seen.seconds, now, out)

    def _hang_due(self, inc: Incarnation) -> float | None:
        # The clock time a serving hang is due at in silence: only for requests told open (a start line, whose end
        # line the engine always prints). Counts are a snapshot: a request may end with no line after them
        # (SGLang prints 0.00 tokens/s for the first decode after an idle hour, then the request is done), so
        # a hang by counts needs a later line that still shows requests and no token (`_serving`).
        serving = inc.serving
        if self.hang_after is None or serving.since is None or not serving.open or inc.state != State.READY:
            return None
        return serving.since + self.hang_after

    def _hang(
        self,
        inc: Incarnation,
        line: int | None,
        at: str | None,
        seconds: float | None,
        now: float,
        out: list[Transition],
    ) -> None:
        assert self.hang_after is not None  # called once due
        inc.serving.hung = True
        self._enter(inc, State.STALLED, line, at, seconds, now, inc.serving.reason(self.hang_after), out)

    def _retire(self, inc: Incarnation) -> None:
        # A crash loop must not grow without bound (the memory, and the checkpoint recorded from it): the history
        # keeps the last PAST_INCARNATIONS_HELD (the incarnation count is `current.number`), each without
        # the error candidates its root cause was chosen from (nothing is chosen again for a past incarnation),
        # and only the newest past one keeps its traceback (a restart that has just begun reports that crash:
        # `verdict_incarnation`), only the newest `_ARGUMENTS_KEPT` their arguments.
        self.settle()  # its error (or the newest past one's), chosen before it is kept
        inc.candidates = []
        inc.pending_index = 0
        if self.history:
            older = self.history[-1]
            if older.error is not None and older.error.traceback:
                older.error = replace(older.error, traceback=())
        self.history.append(inc)
        del self.history[:-PAST_INCARNATIONS_HELD]
        for past in self.history[:-_ARGUMENTS_KEPT]:
            past.arguments = ()

    def _progress(
        self, inc: Incarnation, now: float, out: list[Transition], line: int, source: str | None
    ) -> None:
        inc.last_progress = now
        if inc.pending_since is not None and inc.state not in TERMINAL_STATES:
            # Progress after an error means it was survivable, but only progress of the rank that failed:
            # other ranks go on loading while one dies. `source` None (the ready marker) speaks for all.
            pending = inc.candidates[inc.pending_index :]
            if source is None or any(not c.noise and c.source in ("", source) for c in pending):
                self._resolve(inc)
        if inc.state == State.STALLED and not inc.serving.hung:
            self._enter(inc, inc.phase, line, None, None, now, "progress resumed", out, record_phase=False)

    @staticmethod
    def _answered_in_excerpt(inc: Incarnation, event: RequestServed) -> bool:
        # A client's API request (an OpenAI-compatible route: /v1/chat/completions, /v1/responses, ...) answered
        # below 500 before any startup step of the launch was seen, with no error pending. The engines open those
        # routes only once they serve (vLLM, TensorRT-LLM and llama-cpp-python start Uvicorn after the engine,
        # TGI's router after the warm-up, llama.cpp answers 503 while it loads); SGLang's app is up before its
        # warm-up, but its own warm-up request is POST /generate and its probes /health, /v1/models and
        # /get_model_info (srt/entrypoints/http_server.py _wait_and_warmup). A probe, a model list or a metrics
        # scrape says nothing of the model; a 5xx comes from a dead engine's HTTP server too.
        return (
            inc.state not in TERMINAL_STATES
            and inc.pending_since is None
            and (inc.phase in UNBEGUN_STATES or inc.phase == State.STARTING)
            and event.status is not None
            and event.status < 500
            and _API_ROUTE.match(event.path or "") is not None
        )

    @staticmethod
    def _judged_by_serving(inc: Incarnation) -> bool:
        # An error after ready is pending: whether the server goes on serving decides what it was.
        return inc.state == State.READY and inc.pending_since is not None and inc.crash_phase == State.READY

    def _requests_only(self, inc: Incarnation) -> bool:
        # Every error pending since ready was raised in a request's handler and none is fatal: each was answered
        # to its request with an error status; with no word that the engine died, nor its process gone, nor its
        # health failing, the server serves on.
        pending = [c for c in inc.candidates[inc.pending_index :] if not c.noise]
        return bool(pending) and self._judged_by_serving(inc) and all(map(_in_request, pending))

    def _served_on(self, inc: Incarnation) -> None:
        # The server served after the errors pending since ready: they were a request's (an HTTP 400 or 500 with
        # its traceback, a request's CUDA OOM), counted among the facts, never a crash.
        pending = [c for c in inc.candidates[inc.pending_index :] if not c.noise]
        if pending and self._judged_by_serving(inc):
            err = root_cause(pending, inc.facts, State.READY.value, self.profile, whole=inc.from_start)
            count = inc.facts.get(REQUEST_ERRORS, 0)
            inc.facts[REQUEST_ERRORS] = (int(count) if isinstance(count, int | float) else 0) + 1
            if err is not None:
                inc.facts[LAST_REQUEST_ERROR] = err.summary
        self._resolve(inc)

    @staticmethod
    def _ignored_while_serving(inc: Incarnation, cand: Candidate) -> None:
        # CPython printed an exception it could not raise to anyone (its unraisable hook: a ctypes callback's under
        # a request, llama-cpp-python's sampler) while the server serves: the program went on, no crash; the
        # request it was raised under had an error, counted once for a run of them (one per token of that request)
        before = inc.candidates[-2] if len(inc.candidates) > 1 else None
        if (
            before is not None
            and before.ignored
            and before.source == cand.source
            and cand.opened - before.line <= 3
        ):
            return
        count = inc.facts.get(REQUEST_ERRORS, 0)
        inc.facts[REQUEST_ERRORS] = (int(count) if isinstance(count, int | float) else 0) + 1
        inc.facts[LAST_REQUEST_ERROR] = cand.summary

    def _absolve_chain(self, inc: Incarnation, index: int) -> None:
        # A chain of tracebacks ("During handling of the above exception ...") is one error's story, printed
        # cause first: when its last link was survived (a [[caught]] function logged it and went on: vLLM's
        # model-info cache under a read-only HOME), so were the links before it, whatever their own words.
        link = inc.candidates[index]
        if not (link.noise and link.chained):
            return
        for i in range(index - 1, -1, -1):
            prev = inc.candidates[i]
            if prev.source != link.source:
                continue  # another process's error, printed between the links
            if prev.kind != "traceback":
                break
            inc.candidates[i] = replace(prev, noise=True, fatal=False, startup_step=False)
            if not prev.chained:
                break  # the chain's first link
        pending = inc.candidates[inc.pending_index :]
        if (
            inc.pending_since is not None
            and inc.state not in TERMINAL_STATES
            and all(c.noise for c in pending)
        ):
            self._resolve(inc)  # what was pending was the survived chain

    def _resolve(self, inc: Incarnation) -> None:
        # the pending errors were survived
        inc.pending_since = None
        inc.pending_index = len(inc.candidates)
        inc.judge_by_clock = False

    def _step(self, inc: Incarnation) -> State:
        # the startup step under way, for a crash now: the phase reached, or the KV cache's step when its line
        # came after torch.compile's (see PhaseReached above)
        if self._kv_step_of == inc.number and inc.phase == State.CAPTURING_GRAPHS:
            return State.ALLOCATING_KV_CACHE
        return inc.phase

    def _choose(self, inc: Incarnation, phase: State) -> None:
        # The root cause of a crash in `phase`, and the phase it happened in: a later one its frames point
        # at, or that of the startup step it was raised out of.
        live = _live(inc)
        deferred = self._deferred
        if deferred is not None and deferred.inc is not inc:
            self.settle()  # another incarnation's: its error is due before this one's
        if self.defer_choice and phase is _READY:
            # A crash after ready crashed in `ready` whatever the error (neither its frames' phase nor its startup
            # step moves it): only the error waits, on what it is chosen from now (a choice put off here is made
            # at `settle` or replaced, unmade, by the next one)
            inc.crash_phase = _READY
            self._deferred = _Deferred(inc, live, dict(inc.facts), inc.from_start, self.profile)
            return
        # (this incarnation's, if any: this choice replaces it, as it would have replaced it made)
        self._deferred = None
        self._choice(inc, phase, live, inc.facts, inc.from_start, self.profile)

    def settle(self) -> None:
        """Make the root-cause choice put off while `defer_choice` was set: the current incarnation's error (and
        each past one's) is then what feeding the same events without it would have made."""
        deferred = self._deferred
        if deferred is not None:
            self._deferred = None
            inc = deferred.inc
            crash_phase = inc.crash_phase  # (`ready`, or what came since: the choice does not change it)
            self._choice(inc, _READY, deferred.live, deferred.facts, deferred.whole, deferred.profile)
            inc.crash_phase = crash_phase

    def _choice(
        self,
        inc: Incarnation,
        phase: State,
        live: list[Candidate],
        facts: dict[str, float | str],
        whole: bool,
        profile: Profile,
    ) -> None:
        # `_choose` of the errors `live`, with `facts`, `whole` and `profile` as they were at the choice
        last = self._chosen
        if (
            last is not None
            and last.inc is inc
            and last.phase is phase
            and last.profile is profile
            and last.whole == whole
            and last.live == live
            and last.facts == facts
        ):
            # chosen already from the same errors and facts (a traceback reported at its exception line and again,
            # unchanged, when the next line closes it: a crash loop's next start): the same choice
            inc.crash_phase, inc.error = last.crash_phase, last.error
            return
        chosen_in = phase
        err = root_cause(live, facts, _phase_name(phase), profile, whole=whole)
        if err is not None and err.phase_hint and phase != State.READY:
            hinted = _PHASES[err.phase_hint]
            if _ORDER[hinted] > _ORDER[phase] and not _warm_up_request(hinted, phase, profile):
                phase = hinted
        phase = _step_phase(err, phase)
        inc.crash_phase = State.STARTING if phase == State.PENDING else phase
        inc.error = err
        self._chosen = _Choice(inc, chosen_in, profile, whole, live, dict(facts), inc.crash_phase, err)

    def _choose_again(self, inc: Incarnation) -> None:
        # A crash's root cause chosen again with what came since (a later error, a traceback's fuller report), from
        # the phase the crash was chosen in, not the one its first errors pointed at: those may have named a step
        # that the later ones show was not it (a piecewise graph's failure line, then its scheduler's traceback
        # through the serving loop; a traceback reported cut at a writer's pause, then whole)
        last = self._chosen
        self._choose(
            inc, last.phase if last is not None and last.inc is inc else inc.crash_phase or inc.phase
        )

    def _replaced(self, inc: Incarnation, cand: Candidate, now: float, out: list[Transition]) -> bool:
        # A traceback is reported when its exception line is read and again, whole, when it closes: the
        # second report replaces the first.
        if cand.kind != "traceback":
            return False
        for i in range(len(inc.candidates) - 1, -1, -1):
            old = inc.candidates[i]
            same = old.line == cand.line or (old.opened != 0 and old.opened == cand.opened)
            if old.kind == "traceback" and same and old.source == cand.source:
                inc.candidates[i] = cand
                self._absolve_chain(inc, i)
                if not cand.noise and i < inc.pending_index:
                    # an error reported cut and since resolved went on: it is live again
                    inc.pending_index = i
                    if inc.pending_since is None and inc.state not in TERMINAL_STATES:
                        inc.pending_since, inc.crash_phase = now, inc.phase
                if inc.state == State.CRASHED:
                    self._choose_again(inc)
                elif cand.noise and inc.pending_since is not None and inc.state not in TERMINAL_STATES:
                    if all(c.noise for c in inc.candidates[inc.pending_index :]):
                        self._resolve(inc)  # what was pending turned out to be noise
                elif (
                    self._fatal(inc, cand)
                    and not self._fatal(inc, old)
                    and not cand.noise
                    and inc.state not in TERMINAL_STATES
                ):
                    self._crash(inc, now, out, cand.line, cand.at, reason=cand.summary)
                return True
            if old.line < (cand.opened or cand.line):
                return False
        return False

    def _error(self, inc: Incarnation, cand: Candidate, now: float, out: list[Transition]) -> None:
        if self._replaced(inc, cand, now, out):
            return
        if inc.state in TERMINAL_STATES:
            # Errors printed after the verdict (other ranks, or a log written newest-first) may name the
            # cause better, and other ranks' copies of it belong to its list of ranks.
            if inc.state == State.CRASHED and len(inc.candidates) < _MAX_LATE_CANDIDATES:
                inc.candidates.append(cand)
                # the verdict stands; its root cause (and the phase its frames point at) is chosen again
                self._choose_again(inc)
            return
        inc.candidates.append(cand)
        if cand.noise:
            if cand.ignored and inc.state == State.READY:
                self._ignored_while_serving(inc, cand)
            self._absolve_chain(inc, len(inc.candidates) - 1)
            return
        if _in_request(cand) and (inc.phase in UNBEGUN_STATES or inc.phase == State.STARTING):
            # raised in a request's handler: the server was serving, in an excerpt that begins while it serves.
            # A launch seen loading, sizing its cache or capturing is not serving yet: a request's handler that
            # fails then is the engine's own warm-up request (SGLang's, after Uvicorn is up) or a dry run
            # through the serving path (TensorRT-LLM's KV-cache estimation), a startup error of that phase
            self._progress(inc, now, out, cand.line, None)
            self._enter(inc, State.READY, cand.line, cand.at, None, now, "a request was being served", out)
        inc.healthy_after_error = 0
        if inc.pending_since is None:
            inc.pending_since = now
            inc.crash_phase = self._step(inc)
        if cand.category == Category.KILLED and inc.phase == State.READY and not cand.noise:
            # a death's own words that are not its last (gdb attaching to an aborting ggml process, whose
            # `what()` may follow): the server is going, so the clock judges it as the end of the log would
            inc.judge_by_clock = True
        if self._fatal(inc, cand):
            self._crash(inc, now, out, cand.line, cand.at, reason=cand.summary)

    def _dying(self, inc: Incarnation, event: DyingWords, now: float, out: list[Transition]) -> None:
        # The interpreter's shutdown warnings: the process exited. While starting, with no stop seen, that is the
        # crash now: of the error pending, if one is, else a death the log does not explain (a SIGKILL, the
        # kernel's OOM killer, a native crash with no word). After ready they decide nothing here: a server
        # that was ready and is stopped prints them too.
        if event.clean_exit and event.line != inc.exit_noise_line:
            inc.exit_noise, inc.exit_noise_line = inc.exit_noise + 1, event.line
        if inc.state in TERMINAL_STATES or inc.phase == State.READY:
            return
        first = inc.timeline[0][0].line if inc.timeline else None
        if first is not None and event.line - first + 1 <= inc.exit_noise:
            # every line so far is exit noise (an excerpt of a log's last screenful after its end): a clean stop
            # and a death print the same, and nothing says a launch was under way, so it says no crash
            return
        if inc.pending_since is None:
            # its last words are the launch's last line, not the exit noise that every end prints
            last = (
                f"the last sign of the launch: {event.before}"
                if event.before
                else f"its last words: {event.words}"
            )
            inc.candidates.append(
                Candidate(
                    f"the process died without an error of its own in the log; {last}",
                    event.line,
                    category=Category.KILLED,
                    kind="rule",
                    fatal=True,
                    hint=_SILENT_DEATH_HINT,
                    at=event.at,
                )
            )
            inc.pending_since, inc.crash_phase = now, inc.phase
        self._crash(inc, now, out, event.line, event.at, reason=f"its last words: {event.words}")

    def _fatal(self, inc: Incarnation, cand: Candidate) -> bool:
        # Certain now: a fatal line; or, while the launch is starting, an exception out of a startup step, or an
        # error of a kind no engine starts past (FATAL_WHILE_STARTING: each raises or exits on it).
        if cand.fatal:
            return True
        if inc.state not in STARTUP_PHASES or cand.noise or cand.survivable:
            return False  # a survivable one is settled by what follows: progress, a fatal line, the grace
        if cand.startup_step:
            return True
        category = cand.category or categorize(cand.summary, rules=self.profile.categories)
        # an error-level line alone (no exception, no rule) may be an engine's own fallback: only a port or
        # memory it cannot get is certain from such a line
        certain = FATAL_WHILE_STARTING if cand.kind != "log" else FATAL_WHEN_LOGGED
        return category in certain

    def _crash(
        self,
        inc: Incarnation,
        now: float,
        out: list[Transition],
        line: int | None,
        at: str | None,
        *,
        reason: str,
    ) -> None:
        phase = inc.crash_phase if inc.pending_since is not None and inc.crash_phase else self._step(inc)
        if phase == State.READY and inc.ready_unconfirmed is not None:
            # ready from an early line, and the server never accepted a connection: a crash before ready, in
            # the startup phase it had reached (vLLM's static LoRAs after 'Supported tasks', Uvicorn's bind)
            phase = _before_ready(inc)
        self._choose(inc, phase)
        inc.pending_since = None
        self._enter(inc, State.CRASHED, line, at, None, now, reason, out, record_phase=False)

    def _enter(
        self,
        inc: Incarnation,
        state: State,
        line: int | None,
        at: str | None,
        seconds: float | None,
        now: float,
        reason: str,
        out: list[Transition],
        *,
        record_phase: bool = True,
    ) -> None:
        if state == inc.state:
            return
        t = Transition(state, inc.state, line, at, now, reason, inc.number)
        inc.state = state
        if record_phase and state in PROGRESS_STATES:
            inc.phase = state
        inc.timeline.append((t, seconds))
        out.append(t)


def _entered(inc: Incarnation) -> float | None:
    # the clock time the current phase was entered (a launch still pending: when the clock started for it)
    entered = next((t.now for t, _ in reversed(inc.timeline) if t.state == inc.phase), None)
    return inc.started_now if entered is None and inc.phase == State.PENDING else entered


def _captured(inc: Incarnation) -> bool:
    # whether graph capture itself has begun (its progress bar): a KV-cache line after it is no step back
    return "graphs" in inc.progress


def _before_ready(inc: Incarnation) -> State:
    # the furthest startup phase the incarnation reached before its ready entry
    phases = [t.state for t, _ in inc.timeline if t.state in STARTUP_PHASES]
    return phases[-1] if phases else State.STARTING


def _phase_name(state: State) -> str:
    return state.value if state != State.PENDING else "starting"


def _warm_up_request(hinted: State, phase: State, profile: Profile) -> bool:
    # An engine whose HTTP app serves before its warm-up ends (profile `early_health`: SGLang's lifespan and its
    # _wait_and_warmup send the warm-up requests through the scheduler's event loop, srt/entrypoints/http_server.py)
    # runs those requests through its serving path: a frame of that path while the launch is in its warm-up
    # (capturing_graphs, no ready line yet) is the warm-up request's, a crash of the warm-up, not after ready
    return hinted == State.READY and phase == State.CAPTURING_GRAPHS and profile.early_health


def _step_phase(err: Error | None, phase: State) -> State:
    # The startup step an exception was raised out of names the phase it crashed in, in whatever order the
    # engine's markers came: vLLM's CPU backend warms up (a capture-phase marker) before it sizes the KV cache.
    # Unless the error's own frames point at a later phase within that step: torch.compile and the warm-up run
    # inside vLLM's KV-cache steps (profile_run, _initialize_kv_caches -> compile_or_warm_up_model).
    if err is None or err.step_phase is None or phase not in STARTUP_PHASES:
        return phase
    step = _PHASES[err.step_phase]
    if step not in STARTUP_PHASES:
        return phase
    hinted = _PHASES.get(err.phase_hint or "")
    if hinted is not None and hinted in STARTUP_PHASES and _ORDER[hinted] > _ORDER[step]:
        return hinted
    return step


class _Choice(NamedTuple):
    """A root-cause choice (`Lifecycle._choose`): what it was made from, and what it set."""

    inc: Incarnation
    phase: State
    profile: Profile
    whole: bool
    live: list[Candidate]
    facts: dict[str, float | str]
    crash_phase: State | None
    error: Error | None


class _Deferred(NamedTuple):
    """A root-cause choice after ready put off until `Lifecycle.settle`: what it is made from."""

    inc: Incarnation
    live: list[Candidate]
    facts: dict[str, float | str]
    whole: bool
    profile: Profile


def _live(inc: Incarnation) -> list[Candidate]:
    # The errors a crash is chosen from: those since the last one survived. When they are only wrappers
    # ("exiting due to model loading error", "see root cause above"), the cause they point at is one printed
    # earlier and seemingly survived (llama.cpp goes on after a failed download, then fails to load).
    live = list(inc.candidates[inc.pending_index :]) or list(inc.candidates)
    if all(c.role == "wrapper" or c.noise for c in live):
        earlier = [c for c in inc.candidates[: inc.pending_index] if c.role != "wrapper" and not c.noise]
        return earlier + live
    return live


# A client's request on an OpenAI-compatible route (not the model list): what only a serving engine answers
_API_ROUTE = re.compile(r"/v1/(?!models\b)\w")

_SILENT_DEATH_HINT = (
    "the process died without printing why: its cause is not in this log (a SIGKILL, often the kernel's OOM "
    "killer: check `dmesg -T` and host RAM, or a native crash); only the interpreter's shutdown warnings came"
)


def _oom_killed_hint(limit: int | None) -> str:
    # what to change: the limit the kernel enforced (a container's -m, a pod's resources.limits.memory)
    if limit is None:
        return "the kernel killed it at its memory limit (OOMKilled): raise the limit or lower the host memory use"
    return (
        f"the kernel killed it at its memory limit of {_binary_size(limit)} ({limit} bytes, OOMKilled): raise "
        "the limit (docker run -m, a pod's resources.limits.memory, MemoryMax=) or lower the host memory use"
    )


def _binary_size(size: int) -> str:
    # 8 MiB, 100 MiB, 16 GiB: as a container's or a pod's limit is written
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.3g} {unit}"
    return f"{size} B"


def _in_request(cand: Candidate) -> bool:
    # raised in a request's handler (the profile's [[request]]) and no engine's fatal line
    return cand.in_request and not cand.fatal
