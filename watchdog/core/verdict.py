"""Verdicts: the typed value every sink renders, its JSON (DESIGN.md's object) and the exit codes (pure).

`Verdict` is one incarnation as the lifecycle knew it; `Status` adds what the follower and the daemon know.
The JSON is made here only (`to_json`), its times in one RFC 3339 form (`rfc3339`).
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from watchdog.core.arguments import Argument
from watchdog.core.facts import FactValue
from watchdog.core.lifecycle import Incarnation, State, Transition
from watchdog.core.redaction import redact_text
from watchdog.core.rootcause import Error
from watchdog.vocabulary import (
    EXIT_CRASHED,
    EXIT_NO_VERDICT,
    EXIT_READY,
    EXIT_STALLED,
    OUTCOMES,
    PROBLEM_STATES,
    SETTLED_STATES,
)

if TYPE_CHECKING:
    from watchdog.core.analyzer import Analyzer
    from watchdog.core.compare import Baseline, Changes

__all__ = [
    "EXIT_CODES",
    "Entry",
    "MissingLog",
    "NodeFailure",
    "NodeVerdict",
    "Progress",
    "Remembered",
    "Status",
    "Unreachable",
    "Verdict",
    "build_verdict",
    "exit_code",
    "rfc3339",
]

EXIT_CODES = {
    State.READY: EXIT_READY,
    State.CRASHED: EXIT_CRASHED,
    State.STALLED: EXIT_STALLED,
}


def exit_code(state: State, phase: State | str | None = None) -> int:
    """0 ready (or was ready, then stopped cleanly), 1 crashed, 2 stalled, 3 no verdict (still starting, or
    stopped before it was ready). `phase` is the verdict's phase (for a stop: where the launch had got to)."""
    if state == State.STOPPED and phase is not None and State(phase) == State.READY:
        return EXIT_READY
    return EXIT_CODES.get(state, EXIT_NO_VERDICT)


def rfc3339(at: datetime | float) -> str:
    """A time (a datetime, or Unix seconds) as RFC 3339 in UTC with milliseconds, the one form of the JSON,
    the alerts and the state file: `2026-12-04T08:54:17.831Z`."""
    when = at if isinstance(at, datetime) else datetime.fromtimestamp(at, UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Entry:
    """A timeline entry: a state entered, at a log line (or by the clock), with how long it lasted."""

    state: State
    line: int | None  # the log line that caused it, None for a tick or probe
    at: str | None  # the log's own time of that line, as written
    reason: str
    entered: float  # the follower's clock time it was entered (seconds since the follow began)
    duration: float | None = None  # seconds until the next entry (`durations.duration`), None: unknown

    def to_json(self) -> dict[str, Any]:
        """The timeline entry of the JSON contract."""
        out: dict[str, Any] = {"state": self.state.value, "line": self.line, "at": self.at}
        if self.duration is not None:
            out["duration_seconds"] = round(self.duration, 3)
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress bar: `done` of `total` (weights shards, CUDA graphs, ...)."""

    name: str
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class MissingLog:
    """The log does not exist (yet): a typo in its path, or a launch that never started."""

    overdue: bool  # past stall_after: said as such (`watch` exits 2, the daemon alerts)
    path: str = ""
    since: float | None = None  # Unix time it was first found missing
    seconds: float | None = None  # how long since

    def to_json(self) -> dict[str, Any]:
        """The `missing_log` object of the JSON contract."""
        out: dict[str, Any] = {"overdue": self.overdue}
        if self.path:
            out.update(
                path=self.path,
                since=rfc3339(self.since) if self.since is not None else None,
                seconds=round(self.seconds, 1) if self.seconds is not None else None,
            )
        return out


@dataclass(frozen=True, slots=True)
class NodeFailure:
    """A node's part in a multi-node launch's crash: the node that failed first (its error is the verdict's), or
    another node's error (a consequence), or a node that said nothing of its own (it went quiet)."""

    node: str
    host: str  # the node's configured host ("" for a file on this machine)
    summary: str | None  # its error's summary; None: no error of its own
    category: str | None = None
    ranks: tuple[str, ...] = ()
    line: int | None = None
    state: State | None = None  # for a node with no error of its own: where it stood (hung, waiting)

    def to_json(self) -> dict[str, Any]:
        """An entry of the verdict's `error.consequences` (see `Verdict.to_json`)."""
        out: dict[str, Any] = {"node": self.node, "host": self.host, "summary": self.summary}
        if self.summary is None:
            out["quiet"] = True  # it printed no error: it went quiet, waiting for the node that failed
            out["state"] = self.state.value if self.state is not None else None
        else:
            out.update(category=self.category, ranks=list(self.ranks), line=self.line)
        return out


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node of a multi-node launch: its name, where its log is, and its own verdict."""

    name: str
    host: str  # the node's configured host ("" for a file on this machine)
    target: str  # its log's source, as written (`ssh://gpu1/data/log`)
    serve: bool  # its engine serves: the launch is ready when it is
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        """An entry of the verdict's `nodes` (see `Verdict.to_json`)."""
        v = self.verdict
        return {
            "name": self.name,
            "host": self.host,
            "target": self.target,
            "serve": self.serve,
            "engine": v.engine,
            "state": v.state.value,
            "phase": v.phase.value,
            "progress": {p.name: {"done": p.done, "total": p.total} for p in v.progress},
            "error": v.error.summary if v.error is not None else None,
            "ranks": list(v.error.ranks) if v.error is not None else [],
            "lines_read": v.lines_read,
            "incarnation": v.incarnation,
        }


def _redact(error: Error, redact: Callable[[str], str]) -> Error:
    # `error` with its texts from the log passed through `redact`: itself when none held a credential
    summary, hint = redact(error.summary), redact(error.hint)
    traceback = tuple(redact(line) for line in error.traceback)
    if summary == error.summary and hint == error.hint and traceback == error.traceback:
        return error
    return replace(error, summary=summary, hint=hint, traceback=traceback)


class Remembered:
    """What a follower's verdicts made last, made again only when what it was made of changed: its error redacted
    (`redact_text`; a crash's error is the same object at every status snapshot until another replaces it, and
    its traceback's ~30 lines were most of a snapshot's redaction) and its timeline's entries (each snapshot made
    them all again, durations included, from entries that seldom change)."""

    __slots__ = ("_error", "_timeline")

    def __init__(self) -> None:
        # each set in one store: (the error, redacted); (the timeline as it was, its live_from, the entries)
        self._error: tuple[Error, Error] | None = None
        self._timeline: (
            tuple[tuple[tuple[Transition, float | None], ...], int | None, tuple[Entry, ...]] | None
        )
        self._timeline = None

    def error(self, error: Error) -> Error:
        """`error` redacted (`redact_text`): made again only when it is not the one redacted last."""
        last = self._error
        if last is None or last[0] is not error:
            last = self._error = (error, _redact(error, redact_text))
        return last[1]

    def timeline(self, inc: Incarnation) -> tuple[Entry, ...]:
        """`inc`'s timeline entries (`_entries`): made again only when its timeline's entries (compared by
        identity first: one is replaced, never changed) or where it began to be seen live changed."""
        timeline, last = tuple(inc.timeline), self._timeline
        if last is None or last[1] != inc.live_from or last[0] != timeline:
            last = self._timeline = (timeline, inc.live_from, _entries(inc))
        return last[2]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What is known of one incarnation of a launch: the value every sink renders."""

    engine: str | None
    state: State
    phase: State  # the furthest startup phase reached; for a crash, the phase it happened in
    error: Error | None = None  # a crash's root cause (None unless crashed)
    context: tuple[str, ...] = ()  # a crash with no traceback: the log's last lines
    timeline: tuple[Entry, ...] = ()
    progress: tuple[Progress, ...] = ()
    facts: tuple[tuple[str, FactValue], ...] = ()  # (name, value) in the order they were found
    lines_read: int = 0
    bytes_read: int = 0
    incarnation: int = 1
    incarnations: int = 1
    time_to_ready: float | None = None
    missing_log: MissingLog | None = None
    timed_out: bool = False  # `watch --timeout` ran out
    interrupted: bool = False  # `watch` was interrupted (Ctrl-C)
    # what the engine's own dump says it was started with (credentials redacted); not in `to_json`: hundreds of
    # them (SGLang's ServerArgs) in each /status entry would drown it; `changes` names those that changed
    arguments: tuple[Argument, ...] = ()
    changes: Changes | None = None  # what changed since the launch before, when there is one
    # a multi-node launch (`watchdog.core.nodes`): its nodes; for a crash, the node that failed first (its error
    # is `error`) and the others' part in it. Empty for a launch of one source.
    nodes: tuple[NodeVerdict, ...] = ()
    failed_node: NodeFailure | None = None
    consequences: tuple[NodeFailure, ...] = ()

    @classmethod
    def pending(cls) -> Verdict:
        """A launch not followed yet."""
        return cls(None, State.PENDING, State.PENDING)

    def fact(self, name: str) -> FactValue | None:
        """The value of fact `name`, None when it was not found."""
        return next((value for key, value in self.facts if key == name), None)

    @property
    def stalls(self) -> int:
        """How many times this incarnation stalled (the Nth stall after progress resumed is its own)."""
        return sum(1 for e in self.timeline if e.state is State.STALLED)

    @property
    def reason(self) -> str:
        """Why its last state was entered ("" without a timeline)."""
        return self.timeline[-1].reason if self.timeline else ""

    def durations(self, now: float | None) -> list[float | None]:
        """Seconds spent in each timeline entry: its `duration`, and for the last entry of a launch whose time
        runs (starting, stalled), `now` minus when it was entered (None: unknown)."""
        out = [e.duration for e in self.timeline]
        if out and now is not None and self.state not in SETTLED_STATES:
            out[-1] = max(0.0, now - self.timeline[-1].entered)
        return out

    def phase_seconds(self, now: float | None) -> dict[State, float]:
        """Seconds spent in each startup phase (`durations`, the current one up to `now`): time stalled counts
        for the phase that stalled; ready and the outcomes (crashed, stopped) are not startup phases."""
        out: dict[State, float] = {}
        phase: State | None = None
        for entry, seconds in zip(self.timeline, self.durations(now), strict=True):
            if entry.state in SETTLED_STATES:
                phase = None
                continue
            if entry.state is not State.STALLED:
                phase = entry.state
            if phase is not None:
                out[phase] = out.get(phase, 0.0) + (seconds or 0.0)
        return out

    def entered(self, phase: State) -> float | None:
        """The clock time the last entry of `phase` began; for a phase that was never marked (a crash in its
        first lines), the last entry that was not an outcome."""
        for e in reversed(self.timeline):
            if e.state is phase:
                return e.entered
        return next((e.entered for e in reversed(self.timeline) if e.state not in OUTCOMES), None)

    def baseline(self) -> Baseline:
        """What a later launch is compared with (`watchdog.core.compare`): its arguments, the startup phases it
        went through whole and their seconds, its time to ready and its facts."""
        # imported here: a launch with no launch before it (most replays) compares nothing
        from watchdog.core.compare import Baseline  # noqa: PLC0415

        whole = {e.state for e in self.timeline if e.duration is not None}
        return Baseline(
            incarnation=self.incarnation,
            arguments=self.arguments,
            phases=tuple((p.value, s) for p, s in self.phase_seconds(None).items() if p in whole),
            time_to_ready=self.time_to_ready,
            facts=tuple((k, v) for k, v in self.facts if not isinstance(v, Mapping)),
        )

    def compared(
        self, before: Baseline | None, volatile: Iterable[str] = (), *, baseline: Baseline | None = None
    ) -> Verdict:
        """This verdict with what changed since `before` (the launch before; None: there is none); `baseline`:
        this verdict's own, where it was made already."""
        if before is None or before.incarnation >= self.incarnation:
            return self
        from watchdog.core.compare import compare  # noqa: PLC0415 - see `baseline`

        mine = self.baseline() if baseline is None else baseline
        return replace(self, changes=compare(before, mine, volatile=volatile))

    def with_facts(self, facts: Mapping[str, FactValue]) -> Verdict:
        """This verdict with `facts` added (a probe's, the GPU sampler's), replacing those of the same name."""
        if not facts:
            return self
        kept = tuple((k, v) for k, v in self.facts if k not in facts)
        return replace(self, facts=kept + tuple(facts.items()))

    def redacted(
        self, redact: Callable[[str], str] = redact_text, *, remembered: Remembered | None = None
    ) -> Verdict:
        """This verdict with every text from the log passed through `redact` (credentials masked): itself when
        none held one. `remembered`: where the error redacted last is kept (a follower's; see `Remembered`),
        with the default `redact` only."""
        err = self.error
        if err is not None:
            err = (
                remembered.error(err)
                if remembered is not None and redact is redact_text
                else _redact(err, redact)
            )
        context = tuple(redact(line) for line in self.context)
        # an entry is made again only where its text changed: a status snapshot redacts every entry of the
        # timeline, and nearly none holds a credential
        timeline = tuple(
            e if (reason := redact(e.reason)) == e.reason else replace(e, reason=reason)
            for e in self.timeline
        )
        facts = tuple((k, redact(v) if isinstance(v, str) else v) for k, v in self.facts)
        if (
            err is self.error
            and context == self.context
            and timeline == self.timeline
            and facts == self.facts
        ):
            return self
        return replace(self, error=err, context=context, timeline=timeline, facts=facts)

    def to_json(self) -> dict[str, Any]:
        """The verdict object of the JSON contract (docs/contracts.md), shared by `replay --json`,
        `watch --json` and each entry of /status."""
        error = None
        if self.error is not None:
            error = self.error.to_json()
            if not self.error.traceback:
                error["context"] = list(self.context)
            if self.failed_node is not None:
                error.update(node=self.failed_node.node, host=self.failed_node.host)
                error["consequences"] = [c.to_json() for c in self.consequences]
        out: dict[str, Any] = {
            "engine": self.engine,
            "state": self.state.value,
            "phase": self.phase.value,
            "error": error,
            "timeline": [e.to_json() for e in self.timeline],
            "progress": {p.name: {"done": p.done, "total": p.total} for p in self.progress},
            "facts": {k: dict(v) if isinstance(v, Mapping) else v for k, v in self.facts},
            "lines_read": self.lines_read,
            "bytes_read": self.bytes_read,
            "incarnation": self.incarnation,
            "incarnations": self.incarnations,
        }
        if self.missing_log is not None:
            out["missing_log"] = self.missing_log.to_json()
        if self.time_to_ready is not None:
            out["time_to_ready_seconds"] = round(self.time_to_ready, 3)
        if self.changes is not None:
            out["changes"] = self.changes.to_json()
        out.update((key, True) for key in ("timed_out", "interrupted") if getattr(self, key))
        if self.nodes:
            out["nodes"] = [n.to_json() for n in self.nodes]
        return out


@dataclass(frozen=True, slots=True)
class Unreachable:
    """The launch's host (or its log's source) cannot be reached."""

    since: float  # Unix time the first failed attempt began
    error: str
    alerted: bool  # the unreachable alert went out (after `unreachable_after`)

    def to_json(self) -> dict[str, Any]:
        """The `unreachable` object of a /status entry."""
        return {"since": rfc3339(self.since), "error": self.error, "alerted": self.alerted}


@dataclass(frozen=True, slots=True)
class Status:
    """Where a launch stands: its verdict, and what the follower (its clock, its last line) and the daemon
    (host, labels, since when, ...) know of it. Clock times are the follower's (`elapsed` is its now)."""

    verdict: Verdict
    name: str = ""
    target: str = ""
    elapsed: float | None = (
        None  # seconds since the follow began, on the follower's clock (None: no follower)
    )
    last_line: str = ""  # the last line a rule matched
    host: str = ""  # the host's name in the config, "" for a local file
    labels: tuple[tuple[str, str], ...] = ()
    since: float | None = None  # Unix time the daemon began following the launch
    incarnation_since: float | None = None  # Unix time the current incarnation began, as the follower saw it
    eta: float | None = None  # seconds to ready, from the launch's history
    note: str = ""  # what the source last said (connected, waiting for the file, ...)
    unreachable: Unreachable | None = None

    @property
    def state(self) -> State:
        """The verdict's state."""
        return self.verdict.state

    @property
    def ended(self) -> float | None:
        """The clock time its current state began if that state is an outcome (crashed, stalled: its time
        stopped then), else now (`elapsed`)."""
        v = self.verdict
        if v.state in PROBLEM_STATES and v.timeline:
            return v.timeline[-1].entered
        return self.elapsed

    def time_in_phase(self) -> float | None:
        """Seconds in the phase its verdict reports, until now or until its outcome (None: unknown)."""
        end, start = self.ended, self.verdict.entered(self.verdict.phase)
        return None if end is None or start is None else max(0.0, end - start)

    def time_since_start(self) -> float | None:
        """Seconds since its incarnation began, until now or until its outcome (None: unknown)."""
        end = self.ended
        timeline = self.verdict.timeline
        return None if end is None or not timeline else max(0.0, end - timeline[0].entered)

    def problem_began(self, now: float) -> float:
        """The Unix time its current state began, `now` being the Unix time of the follower's `elapsed`."""
        timeline = self.verdict.timeline
        if self.elapsed is None or not timeline:
            return now
        return now - max(0.0, self.elapsed - timeline[-1].entered)

    def to_json(self) -> dict[str, Any]:
        """A /status entry: the verdict object plus where the launch stands (docs/contracts.md): always
        `name`, `host`, `since`, `labels`, `eta_seconds` and `incarnation_since` (null when unknown)."""
        out = self.verdict.to_json()
        out.update((key, text) for key, text in (("name", self.name), ("target", self.target)) if text)
        if self.elapsed is not None:
            out["elapsed_seconds"] = round(self.elapsed, 3)
            out["entered"] = [round(e.entered, 3) for e in self.verdict.timeline]
            out["last_line"] = self.last_line
        out.update(
            host=self.host,
            since=rfc3339(self.since) if self.since is not None else None,
            labels=dict(self.labels),
            eta_seconds=round(self.eta, 1) if self.eta is not None else None,
            incarnation_since=rfc3339(self.incarnation_since) if self.incarnation_since is not None else None,
        )
        if self.note:
            out["note"] = self.note
        if self.unreachable is not None:
            out["unreachable"] = self.unreachable.to_json()
        return out


def _entries(inc: Incarnation) -> tuple[Entry, ...]:
    # its timeline's entries, with how long each lasted (the last: None)
    last = len(inc.timeline) - 1
    return tuple(
        Entry(t.state, t.line, t.at, t.reason, t.now, inc.duration(i, i + 1) if i < last else None)
        for i, (t, _seconds) in enumerate(inc.timeline)
    )


def verdict_state(inc: Incarnation) -> State:
    """The state `verdict_of(inc)` says, without making the verdict: `pending` while the log is missing and
    nothing started (a launch that never wrote its log has not hung), else the incarnation's own."""
    return State.PENDING if inc.log_missing and inc.phase == State.PENDING else inc.state


def verdict_of(
    inc: Incarnation,
    *,
    engine: str | None,
    lines_read: int,
    bytes_read: int,
    incarnations: int = 1,
    context: tuple[str, ...] = (),
    remembered: Remembered | None = None,
) -> Verdict:
    """The verdict of incarnation `inc` (`remembered`: its timeline's entries made last, see `Remembered`)."""
    phase = inc.crash_phase if inc.state == State.CRASHED and inc.crash_phase else inc.phase
    if phase == State.PENDING and inc.state != State.PENDING:
        phase = State.STARTING
    timeline = remembered.timeline(inc) if remembered is not None else _entries(inc)
    state = verdict_state(inc)
    missing = None
    if inc.log_missing and inc.phase == State.PENDING:
        # no log yet: still `pending` (a typo in the path, or a launch that never started, is not a launch that
        # hung); `missing_log` (the follower adds the path and how long) says so, `overdue` once past stall_after
        missing = MissingLog(overdue=inc.state == State.STALLED)
        phase = State.PENDING
    crashed = inc.error is not None and inc.state == State.CRASHED
    return Verdict(
        engine=engine,
        state=state,
        phase=phase,
        error=inc.error if crashed else None,
        context=context if crashed and inc.error is not None and not inc.error.traceback else (),
        timeline=timeline,
        progress=tuple(Progress(k, d, t) for k, (d, t) in inc.progress.items()),
        facts=tuple(inc.facts.items()),
        lines_read=lines_read,
        bytes_read=bytes_read,
        incarnation=inc.number,
        incarnations=incarnations,
        time_to_ready=inc.ready_seconds
        if inc.ready_seconds is not None and math.isfinite(inc.ready_seconds)
        else None,
        missing_log=missing,
        arguments=inc.arguments,
    )


def build_verdict(
    analyzer: Analyzer,
    inc: Incarnation | None = None,
    *,
    earlier: Iterable[Baseline] = (),
    command: tuple[Argument, ...] = (),
    changes: bool = True,
    remembered: Remembered | None = None,
) -> Verdict:
    """The verdict of `replay`, `watch` and /status: `inc` (default: the one a verdict reports) of `analyzer`.

    A crash with no traceback carries the last lines of the log as its `context`. Its `changes` are those since
    the launch before: the incarnation before it in the analyzer's history, else the newest of `earlier` (what
    the daemon's store keeps of the launch's earlier incarnations, or a log given to compare with) before it.
    Its arguments are those the engine's own dump says, and those of `command` (launch mode's command line,
    `arguments.from_command`) that the dump does not name: llama.cpp prints no command line, and a flag the
    engine does not dump (a port) still tells a relaunch apart. `changes=False`: without them (what the state
    store keeps of a transition has no use for them), the launch before not looked at. `remembered`: what a
    follower's verdict made last (`Remembered`).
    """
    lc = analyzer.lifecycle
    inc = inc or lc.verdict_incarnation()
    crashed_bare = inc.state == State.CRASHED and inc.error is not None and not inc.error.traceback
    verdict = verdict_of(
        inc,
        engine=analyzer.engine,
        lines_read=analyzer.lines_read,
        bytes_read=analyzer.bytes_read,
        incarnations=lc.current.number,  # the history keeps the last ones only
        context=tuple(analyzer.tail()) if crashed_bare else (),
        remembered=remembered,
    )
    if command:
        # the dump's word for a flag wins (SGLang's `mem_fraction_static` is `--mem-fraction-static`)
        dumped = {a.flag for a in verdict.arguments}
        extra = tuple(a for a in command if a.flag not in dumped)
        verdict = replace(verdict, arguments=verdict.arguments + extra)
    if not changes:
        return verdict
    before = [h for h in lc.history if h.number < inc.number]
    stored = max(
        (b for b in earlier if b.incarnation < inc.number), key=lambda b: b.incarnation, default=None
    )
    base = stored
    if before:
        prev = max(before, key=lambda h: h.number)
        base = _baseline(prev)
        if not base.arguments and stored is not None and stored.incarnation == prev.number:
            # restored from a checkpoint of a build that kept no arguments: the store kept them
            base = replace(base, arguments=stored.arguments)
    volatile = analyzer.profile.volatile_arguments if analyzer.profile is not None else ()
    if base is None or base.incarnation >= verdict.incarnation:
        return verdict
    # this incarnation's own, which the next one is compared with once it starts (see `_BASELINES`)
    mine = _baseline(inc, verdict)
    if mine.arguments is not verdict.arguments:
        mine = replace(mine, arguments=verdict.arguments)  # `command`'s, not the incarnation's
    return verdict.compared(base, volatile, baseline=mine)


# The launch before's baseline, remembered: each verdict of an incarnation (its ready, its crash, every /status
# entry) compares it with the incarnation before, which has ended and no longer changes; its baseline is made
# again only when what it is made of changed: its timeline's entries (by identity: an entry is replaced, never
# changed), its facts, arguments, ready time or live range. Keyed by the incarnation's id, held as long as the
# incarnation lives and no longer (a weak reference, whose end takes the entry out): one entry a launch's
# newest incarnations, however many launches a daemon follows (a bound on entries emptied the table before a
# crash loop's 2,000 launches came back to theirs, and each verdict made its launch before's again). A verdict
# with changes asks its own incarnation's too (`build_verdict`): made from it unless remembered, and there for the
# next incarnation's verdicts as their launch before's.
_Made = tuple[
    int,  # number
    tuple[Argument, ...],  # arguments, by identity
    int | None,  # live_from
    float | None,  # ready_seconds
    tuple[tuple[Transition, float | None], ...],  # timeline entries, by identity
    tuple[tuple[str, float | str], ...],  # facts
]
_BASELINES: dict[int, tuple[weakref.ref[Incarnation], _Made, Baseline]] = {}


def _made(inc: Incarnation) -> _Made:
    return (
        inc.number,
        inc.arguments,
        inc.live_from,
        inc.ready_seconds,
        tuple(inc.timeline),
        tuple(inc.facts.items()),
    )


def _baseline(inc: Incarnation, verdict: Verdict | None = None) -> Baseline:
    """`verdict_of(inc).baseline()`, remembered while `inc` stays as it was (see `_BASELINES`); `verdict`: one
    just made of `inc`, whose baseline it is when not remembered."""
    made = _made(inc)
    key = id(inc)
    hit = _BASELINES.get(key)
    if hit is not None and hit[0]() is inc:
        if _same(hit[1], made):
            return hit[2]
        ref = hit[0]
    else:
        ref = weakref.ref(inc, functools.partial(_forget, key))
    if verdict is None:
        # the engine and the lines read are not in a baseline
        verdict = verdict_of(inc, engine=None, lines_read=0, bytes_read=0)
    base = verdict.baseline()
    if base.arguments is not inc.arguments:
        base = replace(base, arguments=inc.arguments)  # launch mode's command: not the incarnation's own
    _BASELINES[key] = (ref, made, base)
    return base


def _forget(key: int, ref: weakref.ref[Incarnation]) -> None:
    # an incarnation ended its life: its entry goes (not one that another, made since at its address, holds)
    hit = _BASELINES.get(key)
    if hit is not None and hit[0] is ref:
        del _BASELINES[key]


def _same(was: _Made, now: _Made) -> bool:
    number, arguments, live_from, ready, entries, facts = was
    return (
        number == now[0]
        and arguments is now[1]
        and live_from == now[2]
        and ready == now[3]
        and len(entries) == len(now[4])
        and all(a is b for a, b in zip(entries, now[4], strict=True))
        and facts == now[5]
    )
