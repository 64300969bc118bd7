"""The analyzer: bytes of one launch's log in, lifecycle transitions out (pure; the caller passes the time).

It strings the pure stages together: framing -> formats (CRI, json-file, journald records) -> detection -> rules
and tracebacks -> lifecycle. Lines that cannot matter stay in C: one pass of the prefilter over each block finds
the lines that hold a literal of the rules in use or an error word, and only those reach Python; a run of a
serving rule's lines (a busy server's batch lines) is read through its last line where tokens flow there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import NamedTuple

from watchdog.core.detection import EngineDetector, detect_engine
from watchdog.core.encoding import Transcoder
from watchdog.core.envelope import ERROR_LEVEL_MARKS, parse, unglue
from watchdog.core.findings import (
    Event,
    GpuMemorySampled,
    HealthChecked,
    LaunchStarted,
    LinesRead,
    LogMissing,
    ProcessExited,
)
from watchdog.core.formats import Unwrapper
from watchdog.core.framing import DEFAULT_MAX_LINE, Block, Framer, clean, clean_keeps, split_line
from watchdog.core.lastbytes import LastLines
from watchdog.core.lifecycle import Lifecycle, Transition
from watchdog.core.prefilter import Prefilter
from watchdog.core.scanner import Scanner
from watchdog.core.scanner import make_databases as make_scanner_databases
from watchdog.core.templates import TEMPLATE_BYTES, TEMPLATES_MAX, ZEROED, digit_blind, has_digit
from watchdog.core.tracebacks import EXCEPTION_ENDINGS
from watchdog.profiles.model import Catalogue, Profile, Rule
from watchdog.vocabulary import DEFAULT_CRASH_GRACE, DEFAULT_HANG_AFTER, SETTLED_STATES, State

__all__ = ["Analyzer", "make_databases"]

# Literals that make a line worth reading besides the profile's own: the parts of errors and tracebacks.
_ERROR_WORDS = (
    b"Traceback",
    b'File "',
    b'File \\"',  # a frame pasted from JSON, its quotes escaped
    b'.py", line ',  # a frame whose head its reporter cut ('sglang/utils.py", line 298, in f')
    b"rror",
    b"xception",
    b"Interrupt",
    b"Exit",
    b"OutOfResources",
    b"Failure",
    b"Timeout",
    b"Killed",
    b"Logging error",
    b"Message: ",
    b"Arguments: ",
    b"Call stack",
    b"panic",
    b"fault",
    b"terminate",
    b"what():",
    b"FATAL",
    b"CRITICAL",
    b"ERROR",  # an error-level line whose words hold none of the above
)
_STARTUP_KINDS = frozenset({"phase", "progress", "ready"})
# The rule kinds each rule set leaves out: while starting, none; once settled, the startup ones and, but while an
# error after ready is pending ("serving"), the lines that show the server serving.
_RULE_SETS = {
    "startup": frozenset[str](),
    "serving": _STARTUP_KINDS,
    "settled": _STARTUP_KINDS | {"served"},
}
# the states `_rules_wanted` compares, each looked up once (not a set of them: three names)
_READY = State.READY
_STALLED = State.STALLED
_STOPPED = State.STOPPED
_DETECT_LINES = 200
_DETECT_BYTES = 64 * 1024
_DETECT_WAIT = 2.0  # seconds a live log may take to show enough lines for detection
_TAIL_BYTES = 8192
# A last line that tells why a process stopped on its own: a usage error, a refusal, a missing thing.
_LAST_WORDS = re.compile(
    r"(?i)\b(?:error|invalid|unknown|unrecogni[sz]ed|usage:|required|not found|no such|cannot|can't|"
    r"failed|fatal|abort(?:ed|ing)?|denied|refused|unsupported|not supported|must be|expected)\b"
)
_MAX_LAST_WORDS = 500
# A process killed by SIGKILL (a shell's status 128 + 9, or the signal named) was ended from outside (the operator,
# a supervisor, the kernel's OOM killer): it could not stop on its own, so its last line does not say why
_SIGKILLED = re.compile(r"\bSIGKILL\b")
_SIGKILL_STATUS = 128 + 9
_ONE_ACTIVE = LinesRead(1, 1, 1)  # a live log's usual read: one line, active (the event is read, never kept)
# a [[serving]] rule as the quick look at a serving line reads it: (request, literal, regex), in bytes
_ServingRule = tuple[str, bytes, "re.Pattern[bytes] | None"]
# ... and as `_parks` reads it: (literal, regex, the places in its match's `groups()` of its token groups, of its
# running and of its waiting requests), the regex None where a line of the rule never waits (a request's line, or
# counts without both the running and the waiting requests)
_CountRule = tuple[bytes, "re.Pattern[bytes] | None", tuple[int, ...], int, int]
# where a serving line of counts that may wait (`_parks`) holds them: the spans of its running and of its waiting
# requests, and of its token groups that took part
_Spans = tuple[int, int, int, int, tuple[tuple[int, int], ...]]
# what `_one_line` finds in every line of one template (`templates`): the prefilter's findings (`found_in_line`),
# the place of the first serving rule whose literal the line holds (-1: none), where its counts are if it is
# a line of counts that may wait by all but its numbers (None: it may not), and whether its text is its bytes
# decoded, one record (`clean` keeps it, `unglue` finds no record in it: `_plain`)
_Plan = tuple[list[int], int, "_Spans | None", bool]


class Analyzer:
    """Follows one launch's log bytes; see the module docstring."""

    def __init__(
        self,
        profile: Profile | Catalogue,
        *,
        stall_after: float | None = None,
        crash_grace: float = DEFAULT_CRASH_GRACE,
        max_line: int = DEFAULT_MAX_LINE,
        deadlines: Mapping[str, float] | None = None,
        hang_after: float | None = DEFAULT_HANG_AFTER,
        prefilter: bool = True,
    ) -> None:
        # `prefilter`: False reads every line whole, in Python (the reference the tests hold the prefilter to)
        # the engine's profile, or the catalogue to detect it from: loaded by the caller (the core reads no file)
        self._catalogue = profile if isinstance(profile, Catalogue) else None
        self._max_line = max_line
        self._stall_after = stall_after
        self._crash_grace = crash_grace
        self.framer = Framer(max_line=max_line)
        self.unwrapper = Unwrapper(max_line=max_line)
        self.transcoder = Transcoder()
        self._deadlines = dict(deadlines or {})
        self._hang_after = hang_after
        self.lifecycle = Lifecycle(
            "generic",
            stall_after=stall_after,
            crash_grace=crash_grace,
            deadlines=deadlines,
            hang_after=hang_after,
        )
        self.profile: Profile | None = None
        self._held: list[Block] = []  # blocks waiting for engine detection
        self._held_since: float | None = None
        self._scanner = Scanner(literal_pass=prefilter)
        self._prefilter = prefilter
        self._rules = _NO_RULES  # the rule set in use (see _refresh_rules)
        self._settled: str | None = None  # which rules are read: a _RULE_SETS name (see _refresh_rules)
        self.lines_read = 0  # lines of every file read (a replaced log's included)
        # lines of the files before the current one: line numbers count from the current file's start
        self._line_base = 0
        self._undated = False  # a new file began an incarnation whose start has no time yet (its first line)
        self.bytes_read = 0
        # the log's last lines read, kept as the pieces read (`LastLines`): a live log's line is kept without
        # copying the 8 KB before it each time
        self._last = LastLines(_TAIL_BYTES)
        # The log's first bytes, while the engine is unknown. When detection had to decide before the head
        # was complete (the source caught up early), the chosen profile reads on and the head is kept, so
        # that the log is read again from its start if the rest of the head names another engine.
        self._raw_head = bytearray()
        self._provisional = False
        self._detector: EngineDetector | None = None  # the head's lines read so far, while provisional
        self._head_cut = 0  # ... which are those of _raw_head[:_head_cut]
        self._head_emitted: set[tuple[State, int | None]] = set()
        self._caught_up = False
        self._last_data = 0.0
        self._cut_reported = False  # the open tracebacks were reported as cut since the last data
        # A serving line not read yet (its bytes without the newline, its line number, the clock then): one whose
        # reading would only set what the next such line sets again (see `_parks`), read when anything else is
        self._parked: tuple[bytes, int, float] | None = None
        if isinstance(profile, Profile):
            self._use(profile)

    @property
    def engine(self) -> str | None:
        """The engine in use, None while still detecting."""
        return self.profile.name if self.profile else None

    @property
    def last_relevant(self) -> str:
        """The last line a rule matched."""
        if self._parked is not None:  # what its reading would make it (a serving rule matches it)
            return parse(clean(self._parked[0])).content.strip()
        return self._scanner.last_relevant

    @property
    def traceback_open(self) -> bool:
        """A traceback has begun and its exception line has not come yet, and it was not taken as cut (the log as
        it was at the start ended in it, or went quiet in it for `crash_grace`): a crash's report may wait."""
        return not self._cut_reported and self._scanner.awaiting_exception

    @property
    def state(self) -> State:
        """The launch's current state."""
        return self.lifecycle.state

    def feed(self, data: bytes, now: float) -> list[Transition]:
        """Take the next bytes of the log; return the transitions they caused."""
        self.bytes_read += len(data)
        if data:
            self._last_data, self._cut_reported = now, False
        if self.transcoder.encoding != "utf-8" or not self.transcoder.decided:
            data = self.transcoder.feed(data)
        if self._provisional:
            return self._feed_provisional(data, now)
        if self.profile is None:
            if len(self._raw_head) < _DETECT_BYTES:
                self._raw_head += data[: _DETECT_BYTES - len(self._raw_head)]
        elif (self.unwrapper.format == "plain" or self.unwrapper.passes(data)) and self.framer.take_line(
            data
        ):
            return self._one_line(data, now)  # a live log's usual read: one line, a block of its own
        return self._blocks(self.unwrapper.feed(self.framer.feed(data)), now)

    def caught_up(self, now: float, *, quiet_for: float = 0.0) -> list[Transition]:
        """The source has read to the end of the file as it is now.

        The engine is detected from what there is (no wait for more lines), and the first time, what the
        log already held is judged whole, as `replay` would (see `Lifecycle.caught_up`). `quiet_for`: seconds
        the log had not grown when it was first read to its end (its file's age), counted as quiet already.
        """
        if self._caught_up and self.profile is not None:
            return []  # a live log's usual call, after each read
        out = self._detect(now, force=True) if self.profile is None and self._held else []
        if not self._caught_up:
            out += self._unpark()
            self._caught_up = True
            # as replay reads a log that ends inside a traceback (the rest may still come: it then replaces
            # this report in place)
            out += self._report_cut(now)
            self.lifecycle.caught_up(now, quiet_for=quiet_for)
        return out

    def _report_cut(self, now: float) -> list[Transition]:
        self._cut_reported = True
        return self._emit_all(self._scanner.open_tracebacks(cut=True), now)

    def close_tracebacks(self, now: float) -> list[Transition]:
        """Take the tracebacks still open as complete: nothing more of them will come (end of the log).
        Their frames may still tell the crash's phase."""
        return self._unpark() + self._emit_all(self._scanner.flush(), now)

    def report_open_tracebacks(self, now: float) -> list[Transition]:
        """Report the tracebacks still open as they are so far (a crash report is going out), and keep them
        open: if more of one comes (a writer that paused), it is reported again, whole, in its place."""
        return self._unpark() + self._emit_all(self._scanner.open_tracebacks(), now)

    def restart(self, now: float) -> list[Transition]:
        """The file was rotated, truncated or replaced: the next bytes are a new file (a new incarnation)."""
        out = self._unpark() + self._blocks(self._unwrap_rest(self.transcoder.flush()), now)
        self.framer = Framer(max_line=self.framer.max_line)
        self.unwrapper = Unwrapper(max_line=self.framer.max_line)
        self.transcoder = Transcoder()
        self._scanner.reset()
        self._provisional, self._raw_head, self._detector = False, bytearray(), None
        self._line_base, self._undated = self.lines_read, True
        out += self._emit(LaunchStarted(1, None, None), now)
        return out

    def tick(self, now: float) -> list[Transition]:
        """Let time pass (stall detection, pending errors, detection of a slow log's engine)."""
        out = self._unpark()
        since = self._held_since if self.profile is None and self._held else None
        if since is not None and now - since >= _DETECT_WAIT:
            out += self._detect(now, force=True)
        in_traceback = not self._cut_reported and self._scanner.busy
        if in_traceback and now - self._last_data >= self._crash_grace:
            # the log went quiet inside a traceback: the writer died printing it, as far as anyone can tell
            out += self._report_cut(now)
            in_traceback = False
        # quiet inside a traceback is a writer dying, not a stall (as replay reads a log that ends there): no
        # stall is said until the traceback is reported cut, however short --stall-after is
        out += self.lifecycle.tick(now, stall=not in_traceback)
        return out

    def next_due(self) -> float | None:
        """The earliest clock time at which `tick` may change anything (a lower bound), or None: until more
        bytes, a probe or the end of the log come, no tick can."""
        due = self.lifecycle.next_due()
        if self.profile is None and self._held and self._held_since is not None:
            due = _earlier(due, self._held_since + _DETECT_WAIT)
        if not self._cut_reported and self._scanner.assembler.busy:  # (`Scanner.busy`, one call fewer)
            due = _earlier(due, self._last_data + self._crash_grace)
        return due

    def probe(
        self, event: ProcessExited | HealthChecked | GpuMemorySampled | LogMissing, now: float
    ) -> list[Transition]:
        """A probe's finding: the log read so far is analyzed first (engine detection is not waited for)."""
        out = self._detect(now, force=True) if self.profile is None and self._held else self._unpark()
        if isinstance(event, ProcessExited) and event.last_words is None and not event.oom_killed:
            event = self._last_words(event)
        return out + self.lifecycle.feed(event, now)

    def _last_words(self, event: ProcessExited) -> ProcessExited:
        # A process gone after an error line no rule knows ("Invalid value for '--port'", then exit 1) was not
        # killed: its last line says why. Only when no error was read since the last one survived.
        inc = self.lifecycle.current
        if inc.candidates[inc.pending_index :]:
            return event
        if event.exit_code == _SIGKILL_STATUS or _SIGKILLED.search(event.detail):
            return event
        last = self.tail(1)
        if not last or _LAST_WORDS.search(last[0]) is None:
            return event
        return replace(
            event,
            last_words=last[0].strip()[:_MAX_LAST_WORDS],
            line=self.lines_read - self._line_base or None,
        )

    def stream_ended(self, now: float) -> list[Transition]:
        """The stream's writer is gone (a source's `Ended`: the container exited): its last line and every
        traceback still open are complete, as at the end of a replayed log, so that what they say is known
        before the platform's word on the exit (a traceback cut short is the crash, not a kill)."""
        out = self._unpark() + self._blocks(self._unwrap_rest(self.transcoder.flush()), now)
        if self.profile is None:
            out += self._detect(now, force=True)
        return out + self.close_tracebacks(now)

    def finish(self, now: float) -> list[Transition]:
        """End of log (replay): flush the last line and every open traceback, make pending errors final."""
        return self.stream_ended(now) + self.lifecycle.finish(now)

    def _unwrap_rest(self, held: bytes) -> list[Block]:
        # the end of a file: its last bytes, its unfinished last line and the lines begun in records and not ended
        unwrapper = self.unwrapper
        return unwrapper.feed(self.framer.feed(held) + self.framer.flush()) + unwrapper.flush()

    @property
    def _tail(self) -> bytes:
        # the lines of the last _TAIL_BYTES bytes read (the record keeps them)
        return self._last.value

    @_tail.setter
    def _tail(self, value: bytes) -> None:
        self._last.set(value)

    def _keep(self, data: bytes) -> None:
        # `data` read: the tail's newest bytes
        self._last.feed(data)

    def tail(self, count: int = 20) -> list[str]:
        """The last `count` lines read, cleaned: context for a crash with no traceback."""
        lines = [ln.text for raw in self._tail.split(b"\n")[-count - 1 :] for ln in split_line(0, raw)]
        return [ln for ln in lines if ln.strip()][-count:]

    # -- detection --------------------------------------------------------------------------------------

    def _use(self, profile: Profile) -> None:
        self.profile = profile
        self.lifecycle.engine, self.lifecycle.profile = profile.name, profile
        self._scanner.profile = profile
        self._scanner.benign = profile.rules_of("benign")
        self.lifecycle.trust_silent_health = not profile.early_health
        self.lifecycle.health_means_ready = profile.health_means_ready
        self._settled = None
        self._refresh_rules()

    def prepare(self) -> Iterator[None]:
        """What the log's first error would otherwise make on its way to the verdict, made now, one piece per
        step (for a caller with time to spare: a live follower, in a worker thread, once the engine is known): the
        profile's rule sets of a server up or down (each a Hyperscan database) and its category rules' regexes
        (all of an engine's, 30 ms on the development machine, were compiled at the first crash of a process).
        Only a piece made yields: an engine whose pieces another launch made costs a look at each. Shared by
        every launch of the engine; nothing read or judged changes, so another thread may run it while this one
        feeds the analyzer (a piece made twice at once is made the same twice: the last one is kept)."""
        profile = self.profile
        if profile is None:
            return
        for settled in _RULE_SETS:
            made = _rule_set.cache_info().misses
            _rule_set(profile, settled)
            if _rule_set.cache_info().misses != made:
                yield
        for rule in profile.categories:
            if rule.compile_now():
                yield
        # the regexes of its traceback tables, hints and rules, compiled when first searched: a crash's burst of
        # compiles in the daemon's event loop otherwise (a loaded CI saw a 95 ms callback)
        for pattern in profile.lazy_patterns():
            if pattern.compile_now():
                yield

    def _refresh_rules(self) -> None:
        # Once the server is up (or down), startup markers cannot change anything: dropping their literals
        # keeps a serving log's "Decode batch" lines on the C fast path. Lines that show it serving (`served`
        # rules: access lines, batch lines) are read only while an error after ready waits for them.
        if self.profile is None:
            return
        settled = self._rules_wanted()
        if settled == self._settled:
            return
        self._settled = settled
        self._rules = _rule_set(self.profile, settled)
        self._scanner.rules = self._rules.rules

    def _rules_wanted(self) -> str:
        # The rule set to read with (_RULE_SETS): ready from an early line is not settled yet (the ready line that
        # confirms it must still be read); ready with an error pending reads the lines that show it serving.
        inc = self.lifecycle.current
        # the lifecycle's state, asked once a line; the states it is compared with are module constants (an enum's
        # member looked up on its class costs a lookup through its metaclass each time)
        state = inc.state
        if state is _STALLED and inc.serving.hung:
            # a ready server that hangs: its serving lines, not startup markers, can end the stall
            return "settled"
        if state not in SETTLED_STATES or (state is _READY and inc.ready_unconfirmed is not None):
            return "startup"
        if state is _STOPPED and inc.phase is not _READY:
            # stopped before any ready line: a request answered as it drains still shows it had been serving
            return "startup"
        return "serving" if state is _READY and inc.pending_since is not None else "settled"

    def _detect(self, now: float, *, force: bool) -> list[Transition]:
        held = b"".join(b.data for b in self._held)
        if not force and held.count(b"\n") < _DETECT_LINES and len(held) < _DETECT_BYTES:
            return []
        # Exactly the first lines within the first bytes, however the bytes arrived: same log, same engine.
        head = held[:_DETECT_BYTES].decode("utf-8", "replace").splitlines()[:_DETECT_LINES]
        assert self._catalogue is not None  # no profile yet: the analyzer was given the catalogue
        engine = detect_engine(head, self._catalogue)
        self._provisional = len(head) < _DETECT_LINES and len(self._raw_head) < _DETECT_BYTES
        if not self._provisional:
            self._raw_head = bytearray()
        self._use(self._catalogue.profile(engine or "generic"))
        blocks, self._held = self._held, []
        out: list[Transition] = []
        for block in blocks:
            # a serving line the block before left waiting is read before this block's lines (`_unpark`)
            out += self._unpark()
            out += self._block(block.data, now, held=True)  # their tail was kept when they were held
        return out

    # -- scanning ---------------------------------------------------------------------------------------

    def _blocks(self, blocks: list[Block], now: float) -> list[Transition]:
        if not blocks:
            return []
        if self.profile is None:
            if self._held_since is None:
                self._held_since = now
            self._held.extend(blocks)
            for block in blocks:
                self._keep(block.data)
            return self._detect(now, force=False)
        out = []
        for block in blocks:
            # a serving line left waiting, before the lines after it (the block before's too)
            out += self._unpark()
            out += self._block(block.data, now)
        return out

    def _one_line(self, data: bytes, now: float, key: bytes | None = None) -> list[Transition]:
        # `_block` of a block of one line (`data`, its newline last), as a live log is read: a line no rule but
        # a serving one can read (the prefilter finds nothing in it, no traceback is open) is done here, as
        # `_block` and `_serving_lines` do it, without their loop; a line the prefilter finds, or any line while
        # a traceback or a dump is open, is read whole here too; any other goes to `_block`.
        first = self.lines_read - self._line_base + 1
        scanner = self._scanner
        if first == 1 or not self._prefilter:
            return self._unpark() + self._block(data, now)
        inc = self.lifecycle.current
        # `_rules_wanted` of a server up and serving, with no error pending (a settled log's usual line), inline;
        # any other state asks it
        if not (
            inc.state is _READY
            and inc.pending_since is None
            and inc.ready_unconfirmed is None
            and self._settled == "settled"
        ) and (self._rules_wanted() != self._settled):
            self._refresh_rules()
        rules = self._rules
        # a traceback or an argument dump is open: the line is read whole, whatever it holds (no line waits
        # then: one that waits is the last line read, and a line read that opens either is no serving line)
        whole = scanner.reads_all
        # what the line holds of the prefilter's literals and patterns, in one pass: whether to read it whole, and
        # with which rules (the scanner need not look for them again); None: no Hyperscan (it tells no more than
        # `lines`), or the line is read whole anyway (a traceback's line holds error words that the rules'
        # literals, which the scanner looks for, mostly do not: its pass is the quicker)
        plan: _Plan | None = None
        if whole:
            hits, found = None, []
        elif rules.plans is not None:
            # the line's template says what the prefilter finds in it and where its counts are (`_Plan`)
            if key is None:  # (`key`: the caller made it, `data.translate(ZEROED)`)
                key = data.translate(ZEROED)
            plan = rules.plans.get(key)
            if plan is None:
                plan = _plan(data, rules, key)
            hits = plan[0]
            found = [0] if hits else []
        else:
            hits = rules.others.found_in_line(data)
            found = rules.others.lines(data) if hits is None else [0] if hits else []
        if not rules.one_line:
            return self._unpark() + self._block(data, now, found=None if whole else found)
        self._last.feed(data)  # `_keep`
        serving = None  # the line, if it is a serving rule's
        parks = False  # ... and it waits (`_parks`)
        if whole:
            found = [0]
        elif not found:
            if plan is not None:
                if plan[1] >= 0:
                    serving = data[:-1]
                    spans = plan[2]
                    if spans is not None and not ((held := self.lifecycle.current.serving).hung or held.open):
                        # `_parks` of a line whose template showed all but its numbers to allow it (`_plan`): its
                        # counts are at `spans`, and each token count there reads as a number (as it did in the
                        # template's first line)
                        made: float | None = None  # as `_parks` sums them
                        parks = True
                        for a, b in spans[4]:
                            value = serving[a:b]
                            try:
                                made = (made or 0.0) + float(
                                    value.replace(b",", b"") if 44 in value else value
                                )
                            except ValueError:
                                parks = False
                                break
                        parks = parks and (
                            (made is not None and made > 0)
                            or int(serving[spans[0] : spans[1]]) + int(serving[spans[2] : spans[3]]) == 0
                        )
            else:
                place = 0  # of the first serving rule whose literal the line holds
                for _, match, _ in rules.serving:
                    if data.find(match) >= 0:
                        serving = data[:-1]
                        break
                    place += 1
                parks = serving is not None and self._parks(serving, rules.counts, place)
            if serving is not None and parks:
                # read when anything else is, unless the next serving line says all it says first
                self._parked = (serving, first, now)
                self.lines_read += 1
                # as its reading would count it (`scan_serving`'s); `_emit`, one call fewer
                out = self.lifecycle.feed(_ONE_ACTIVE, now)
                if out and self._provisional:
                    self._head_emitted.update((t.state, t.line) for t in out)
                return out
        out = self._unpark() if found or serving is not None else []
        benign, errors = scanner.benign_lines, scanner.error_lines
        if found:
            # the line is read whole (`_block`'s loop for a block of one found line, without the loop)
            candidates = rules.candidates
            # (`plan`: a line found by its template; a traceback's line, read whole, by `_plain_line`)
            plain = plan[3] if plan is not None else whole and _plain_line(data[:-1])
            if hits is None or candidates is None:
                out += self._line(data[:-1], first, now, plain=plain)
            else:
                out += self._line(data[:-1], first, now, *candidates.of(hits, data), plain=plain)
            if self._rules_wanted() != self._settled:
                self._refresh_rules()
        elif serving is not None:  # the line is a run of serving lines of its own: read whole
            out += self._serving_line(serving, first, now, plan is not None and plan[3])
        self.lines_read += 1
        active = 1 - (scanner.benign_lines - benign) - (scanner.error_lines - errors)
        if active == 1:
            out += self._emit(_ONE_ACTIVE, now)
        else:
            # as `_block` counts them: no healthy line after an error line, the error line itself being the last
            healthy = 0 if scanner.error_lines != errors else active
            out += self._emit(LinesRead(1, max(0, active), healthy), now)
        return out

    def _block(
        self, data: bytes, now: float, *, held: bool = False, found: list[int] | None = None
    ) -> list[Transition]:
        # `found`: `_found(data, 0)` when the caller knows it (the rules it was found with are those in use). A crash
        # after ready has its root cause chosen once, from every error of the block (`Lifecycle.defer_choice`): no
        # transition carries it, and no one reads it before the block is read.
        lifecycle = self.lifecycle
        lifecycle.defer_choice = True
        try:
            return self._block_lines(data, now, held, found)
        finally:
            lifecycle.defer_choice = False
            lifecycle.settle()

    def _block_lines(self, data: bytes, now: float, held: bool, found: list[int] | None) -> list[Transition]:
        # `_block`'s reading
        first = self.lines_read - self._line_base + 1
        if not held:
            self._keep(data)
        out: list[Transition] = []
        if first == 1 and self.lifecycle.current.phase == State.PENDING:
            out += self._emit(_first_line(data), now)
        elif first == 1 and self._undated:
            # a replaced file's incarnation began at its first line: its time, not the old file's
            start = _first_line(data)
            self.lifecycle.date_start(start.at, start.seconds)
        if first == 1:
            self._undated = False
        self._refresh_rules()
        scanner = self._scanner
        quiet_before = scanner.benign_lines + scanner.error_lines
        last_error = -1  # index of the last line in this block that was part of an error
        quiet_after_error = 0  # benign lines after it
        settled = self._settled
        if found is None:
            found = self._found(data, 0)  # the starts of the lines a rule (not a serving rule alone) may read
        k = 0
        pos = index = 0  # the first line not passed yet: its offset, and its index in the block
        while True:
            if scanner.reads_all:
                at = pos  # a traceback or an argument dump is open: every line is read
                if at >= len(data):
                    break
            else:
                while k < len(found) and found[k] < pos:
                    k += 1
                if k == len(found):
                    break
                at = found[k]
            if at > pos:
                # the lines passed over: of a serving rule alone (read at the next other line) or of no rule
                read, pos, index = self._serving_lines(data, pos, at, index, first, now)
                out += read
                index += data.count(b"\n", pos, at)
            end = data.find(b"\n", at)
            benign, errors = scanner.benign_lines, scanner.error_lines
            raw = data[at:end]
            # (a traceback's lines, read whole each: by its template, a line of one known plain, `_plain_line`)
            out += self._line(raw, first + index, now, plain=self._prefilter and _plain_line(raw))
            if scanner.error_lines != errors:
                last_error, quiet_after_error = index, 0
            elif scanner.benign_lines != benign:
                quiet_after_error += 1
            pos, index = end + 1, index + 1
            if self._rules_wanted() != settled:
                # ready (or crashed) mid-block: the rest of the block is read with the new rules
                self._refresh_rules()
                settled = self._settled
                found, k = self._found(data, pos), 0
        read, pos, index = self._serving_lines(data, pos, len(data), index, first, now, end=True)
        out += read
        count = index + _newlines(data, pos, len(data))  # a block ends with a newline
        self.lines_read += count
        active = count - (scanner.benign_lines + scanner.error_lines - quiet_before)
        healthy_tail = active if last_error < 0 else max(0, count - last_error - 1 - quiet_after_error)
        out += self._emit(LinesRead(count, max(0, active), healthy_tail), now)
        return out

    def _found(self, data: bytes, start: int) -> list[int]:
        # the starts of the lines of data[start:] to read whole, in order
        if self._prefilter:
            return self._rules.others.lines(data, start)
        out, pos = [], start
        while pos < len(data):
            out.append(pos)
            pos = data.find(b"\n", pos) + 1 or len(data)
        return out

    def _serving_lines(
        self, data: bytes, lo: int, hi: int, index: int, first: int, now: float, *, end: bool = False
    ) -> tuple[list[Transition], int, int]:
        # The lines of data[lo:hi] (whole lines, the first the block's line `index`, numbered `first + index`),
        # and a line start in them with its index (so that no newline is counted twice), that hold a serving rule's literal
        # and no other rule's: serving lines in a row (a busy server prints thousands: SGLang's decode batch
        # every 40 steps). What they tell the hang's clock is where tokens start or stop flowing, so only those
        # lines, the first and the last of the run, and every line of a single request are read whole (as any
        # other line); a line the quick look cannot read is read whole too. Found without a look at each line:
        # the last one first, and when tokens flow (or no request is left) there, it says all the clock needs
        # (a hang that began and ended inside the run is not told: a live log comes in small runs).
        serving = self._rules.serving
        if not serving or hi <= lo:
            return [], lo, index
        last = max(data.rfind(match, lo, hi) for _, match, _ in serving)
        if last < 0:
            return [], lo, index
        begin = data.rfind(b"\n", lo, last) + 1 or lo
        line = data[begin : data.find(b"\n", last)]
        # the run's one line (a live log's block of one line), read whole whatever it says; or its last line,
        # which may say all the clock needs
        alone = begin == lo or all(data.find(match, lo, begin) < 0 for _, match, _ in serving)
        if alone or _serving_status(line, serving) in ("flowing", "idle"):
            index += _newlines(data, lo, begin)
            if end and self._parks(line, self._rules.counts):
                # the block's last serving line (`end`: no line after it is read) waits, as in `_one_line`
                self._parked = (line, first + index, now)
                return [], begin, index
            return self._serving_line(line, first + index, now), begin, index
        starts: set[int] = set()
        for _, match, _ in serving:
            at = data.find(match, lo, hi)
            while at >= 0:
                starts.add(data.rfind(b"\n", lo, at) + 1 or lo)
                at = data.find(match, at + len(match), hi)
        run: list[tuple[bytes, int]] = []
        pos, number = lo, first + index
        for begin in sorted(starts):
            number += data.count(b"\n", pos, begin)
            run.append((data[begin : data.find(b"\n", begin)], number))
            pos = begin
        statuses = [_serving_status(raw, serving) for raw, _ in run]
        keep = {0, len(run) - 1}
        for j in range(1, len(run)):
            status, before = statuses[j], statuses[j - 1]
            if status in ("request", "unknown") or status != before:
                keep.update((j - 1, j))
        out: list[Transition] = []
        for j in sorted(keep):
            if statuses[j] is not None:
                out += self._serving_line(*run[j], now)
        return out, lo, index

    def _parks(self, raw: bytes, rules: tuple[_CountRule, ...], first: int = -1) -> bool:
        # Whether the serving line `raw` (of one run of serving lines, as `_one_line` reads it) may wait: a line of
        # counts (running and waiting requests, and tokens) that shows tokens flowing or no request, while no
        # request is told open and no hang is on. Read, it would only set the counts and the hang clock's start
        # (from it, or none), and end no hang; the next such line sets them all again, so that of a run of them
        # only the last need be read (as `_serving_lines` reads a block's run), when anything else comes.
        # `first`: the place in `rules` of the first rule whose literal the caller found `raw` to hold (none before
        # it does); -1: not looked for.
        serving = self.lifecycle.current.serving
        # (a byte's value `in` bytes: a memchr, where `bytes in bytes` raises and clears a TypeError first)
        if serving.hung or serving.open or not raw.isascii() or 13 in raw or 27 in raw:  # CR, ESC
            return False
        hit = None
        if first >= 0:
            hit = rules[first]
            for rule in rules[first + 1 :]:
                if raw.find(rule[0]) >= 0:
                    return False  # two rules' lines in one: read it
        else:
            for rule in rules:
                if raw.find(rule[0]) >= 0:
                    if hit is not None:
                        return False  # two rules' lines in one: read it
                    hit = rule
        if hit is None or hit[1] is None or raw.count(hit[0]) != 1:
            return False
        m = hit[1].search(raw)
        if m is None:
            return False
        groups = m.groups()
        running, waiting = groups[hit[3]], groups[hit[4]]
        if running is None or waiting is None or not running.isdigit() or not waiting.isdigit():
            return False
        made: float | None = None  # as `scanner._serving` sums them
        for place in hit[2]:
            value = groups[place]
            if value is not None:
                try:
                    made = (made or 0.0) + float(value.replace(b",", b"") if 44 in value else value)  # ","
                except ValueError:
                    return False
        return (made is not None and made > 0) or int(running) + int(waiting) == 0

    def _unpark(self) -> list[Transition]:
        # the serving line that waits, read now (with the clock of its arrival)
        parked = self._parked
        if parked is None:
            return []
        self._parked = None
        return self._serving_line(*parked)

    def _serving_line(self, raw: bytes, line_no: int, now: float, plain: bool = False) -> list[Transition]:
        # `_line` of a line the prefilter passed over (see `Scanner.scan_serving`): one cleaned record, read by the
        # serving rules alone. A line that cleaning changes (an escape or a control character removed: its text
        # may hold what its bytes did not) or that holds more than one record is read as any other. `plain`: its
        # template vouches that its text is its bytes decoded, one record (`_plain`)
        if plain:
            events = self._scanner.scan_serving(parse(raw.decode("ascii")), line_no)
            if events is not None:
                return self._emit_all(events, now)
        elif raw.isascii() and 13 not in raw:  # no CR (a byte's value `in` bytes: a memchr)
            text = clean(raw)
            if len(text) == len(raw):
                pieces = unglue(text)
                if len(pieces) == 1:
                    events = self._scanner.scan_serving(parse(text), line_no)
                    if events is not None:
                        return self._emit_all(events, now)
        return self._line(raw, line_no, now)

    def _line(
        self,
        raw: bytes,
        line_no: int,
        now: float,
        candidates: tuple[Rule, ...] | None = None,
        unexcepted: bool = False,
        *,
        plain: bool = False,
    ) -> list[Transition]:
        # `candidates`: the rules whose literal `raw` may hold (`_Candidates.of`), which are those its records'
        # contents may hold where its text is its bytes decoded (parts of it); where cleaning changed the text (an
        # escape or a control character removed, bad UTF-8 replaced), the scanner looks for them itself.
        # `unexcepted`: `raw` holds no exception ending (`EXCEPTION_ENDINGS`), nor then may its contents, on the same
        # terms (see `Scanner.scan`). `plain`: the line's template vouches that its text is its bytes decoded, one
        # record (`_plain`): neither cleaned nor looked at for records glued in it
        out: list[Transition] = []
        pieces: Iterable[str]
        if plain:
            pieces = (raw.decode("ascii"),)
        # `split_line`'s redraws; a line with no CR is one, its text cleaned (no generator nor `Line` made)
        elif 13 not in raw:  # no CR
            text = clean(raw)
            pieces = unglue(text)
            if candidates is not None and (
                len(text) != len(raw) if raw.isascii() else text.encode("utf-8", "surrogatepass") != raw
            ):
                candidates, unexcepted = None, False
        else:
            pieces = [piece for seg in split_line(0, raw) for piece in unglue(seg.text)]
            candidates, unexcepted = None, False
        scan = self._scanner.scan
        for piece in pieces:
            for event in scan(
                parse(piece, remember=True),
                line_no,
                self.lifecycle.current.phase,
                candidates,
                unexcepted=unexcepted,
            ):
                out += self._emit(event, now)
        return out

    def _emit(self, event: Event, now: float) -> list[Transition]:
        out = self.lifecycle.feed(event, now)
        if out and self._provisional:
            self._head_emitted.update((t.state, t.line) for t in out)
        return out

    def _emit_all(self, events: list[Event], now: float) -> list[Transition]:
        out: list[Transition] = []
        for event in events:
            out += self._emit(event, now)
        return out

    def _feed_provisional(self, data: bytes, now: float) -> list[Transition]:
        head = self._raw_head
        old = len(head)
        detector = self._detector
        size = old + len(data)
        key = None
        if (
            detector is not None
            and old == self._head_cut  # the head read so far ends with a line end
            and detector.count < _DETECT_LINES
            and size <= _DETECT_BYTES
            and self.unwrapper.format in (None, "plain")
        ):
            # `_detect_head` of a live log's usual read, one line of ASCII: the line as `splitlines` reads it. Its
            # template: the markers it holds are looked up by it (and its plan). A template the detector has seen
            # is of one such line (`feed_template`), and mostly tells it all (none longer than TEMPLATE_BYTES is
            # kept: a crash's traceback in one write mostly is one)
            key = data.translate(ZEROED) if size - old <= TEMPLATE_BYTES else None
            if key is not None and detector.feed_template(data, key):
                head += data
            elif (
                data[-1:] == b"\n"
                and data.find(b"\n") == size - old - 1  # one line
                and data.isascii()
                # no character but its newline that `splitlines` breaks at: CR, VT, FF, FS, GS, RS (`_breaks`,
                # inline; a byte's value `in` bytes: a memchr)
                and not (13 in data or 11 in data or 12 in data or 28 in data or 29 in data or 30 in data)
            ):
                head += data
                if key is None:
                    key = data.translate(ZEROED)
                detector.feed(data[:-1].decode("ascii"), key)
            else:
                key = None
        if key is not None:
            assert detector is not None  # (read above)
            self._head_cut = size
            found, count = detector.engine(), detector.count
        else:
            head += data[: _DETECT_BYTES - old]
            found, count = self._detect_head(head)
            size = len(head)
        complete = count >= _DETECT_LINES or size >= _DETECT_BYTES
        engine = found or "generic"
        if self.profile is not None and engine == self.profile.name:  # `self.engine`
            if complete:
                self._provisional = False  # the whole head was read: this engine it is
                self._raw_head, self._detector = bytearray(), None
            if (self.unwrapper.format == "plain" or self.unwrapper.passes(data)) and self.framer.take_line(
                data
            ):
                return self._one_line(data, now, key)
            return self._blocks(self.unwrapper.feed(self.framer.feed(data)), now)
        # The head, read further, names another engine (more of its markers): read the log again from its
        # start with that engine's profile, as replay (which sees the whole head at once) reads it, without
        # reporting twice the transitions already reported.
        whole = bytes(head[:old]) + data
        emitted, detector, cut = self._head_emitted, self._detector, self._head_cut
        bytes_read, caught_up, transcoder = self.bytes_read, self._caught_up, self.transcoder
        catalogue = self._catalogue
        assert catalogue is not None  # provisional: the engine was detected
        self.__init__(  # type: ignore[misc]  # the same analyzer, reading again from the start
            catalogue,
            stall_after=self._stall_after,
            crash_grace=self._crash_grace,
            max_line=self._max_line,
            deadlines=self._deadlines,
            hang_after=self._hang_after,
            prefilter=self._prefilter,
        )
        self._use(catalogue.profile(engine))
        self.transcoder = transcoder  # `whole` is decoded already; the rest of the log goes on through it
        out = self._blocks(self.unwrapper.feed(self.framer.feed(whole)), now)
        self.bytes_read, self._caught_up = bytes_read, caught_up
        if caught_up:
            self.lifecycle.caught_up(now)
        out = [t for t in out if (t.state, t.line) not in emitted]
        if not complete:  # the rest of the head may still name another engine
            emitted.update((t.state, t.line) for t in out)
            self._provisional, self._raw_head, self._head_emitted = True, head, emitted
            self._detector, self._head_cut = detector, cut
        return out

    def _detect_head(self, head: bytearray) -> tuple[str | None, int]:
        # `detect_engine` of the head's first lines, and how many there are (up to _DETECT_LINES), reading each
        # line once: the lines up to the head's last newline are final (the bytes after a newline never change
        # how the bytes before it decode or split), the rest may still grow, so it is only tried, on a copy.
        if self.unwrapper.format not in (None, "plain"):
            return self._detect_records(bytes(head))
        detector = self._detector
        if detector is None:
            assert self._catalogue is not None  # provisional: the engine was detected
            detector, self._head_cut = EngineDetector(self._catalogue.markers), 0
            self._detector = detector
        cut = head.rfind(b"\n") + 1
        if cut > self._head_cut:
            if detector.count < _DETECT_LINES:
                room = _DETECT_LINES - detector.count
                new = bytes(head[self._head_cut : cut])
                if new.isascii() and not _breaks(new):
                    # lines of ASCII that `splitlines` breaks at their newlines alone: read by their templates, as
                    # `_feed_provisional` reads a line a read (a crash loop's traceback in one write, a burst)
                    keys = new.translate(ZEROED).splitlines(keepends=True)[:room]
                    raws = new.splitlines(keepends=True)[:room]
                    detector.feed_lines(new.decode("ascii").split("\n", room)[: len(keys)], keys, raws)
                else:
                    lines = new.decode("utf-8", "replace").splitlines()
                    detector.feed_lines(lines[:room])
            self._head_cut = cut
        if detector.count >= _DETECT_LINES:
            return detector.engine(), detector.count
        rest = head[cut:].decode("utf-8", "replace").splitlines()
        if not rest:
            return detector.engine(), detector.count
        trial = detector.copy()
        trial.feed_lines(rest[: _DETECT_LINES - detector.count])
        return trial.engine(), trial.count

    def _detect_records(self, head: bytes) -> tuple[str | None, int]:
        # `_detect_head` of a log of records: its lines are those decoded, the unfinished ones tried as they are;
        # read again from the head's start each time (while provisional only, at most _DETECT_BYTES)
        framer, unwrapper = Framer(max_line=self._max_line), Unwrapper(max_line=self._max_line)
        blocks = unwrapper.feed(framer.feed(head) + framer.flush()) + unwrapper.flush()
        assert self._catalogue is not None  # provisional: the engine was detected
        detector = EngineDetector(self._catalogue.markers)
        detector.feed_lines(
            b"".join(b.data for b in blocks).decode("utf-8", "replace").splitlines()[:_DETECT_LINES]
        )
        return detector.engine(), detector.count


class _RuleSet(NamedTuple):
    """The rules read in one of _RULE_SETS, ready for a block: which lines to read whole, which to glance at."""

    others: Prefilter  # finds the lines holding a literal of a rule but a serving rule, or an error word
    serving: tuple[_ServingRule, ...]  # the [[serving]] rules, as the quick look at a serving line reads them
    rules: tuple[Rule, ...]  # the scanner's: every rule of the set but the benign ones
    one_line: bool = True  # every serving rule has a literal: `_one_line` may read a line of the set
    counts: tuple[_CountRule, ...] = ()  # the serving rules as `_parks` reads them
    candidates: _Candidates | None = None  # `rules` by what `others` finds in a line
    # `_one_line`'s plan of each line template seen (`_plan`), None where a template cannot tell them (a literal
    # or a pattern of the set that tells a digit from another, or no Hyperscan: `found_in_line` tells no more)
    plans: dict[bytes, _Plan] | None = None


class _Candidates:
    """Which of a rule set's rules a line may match, from what its prefilter found in the line (`found_in_line`):
    those whose literal the prefilter found, and those whose literal it does not look for (a serving rule's)
    where the line holds it. The scanner's own pass over the line's content (`Scanner.scan`) would find no other:
    the content is a part of the line's text. One thread at a time, as the prefilter."""

    def __init__(self, rules: tuple[Rule, ...], prefilter: Prefilter) -> None:
        self._rules = rules
        index = {literal: i for i, literal in enumerate(prefilter.literals)}
        # what the prefilter finds where a line may hold an exception ending (one of `EXCEPTION_ENDINGS`, which are
        # among its literals): a line found to hold none of them holds no exception line (`Scanner.scan`)
        self._endings = frozenset(index[e.encode()] for e in EXCEPTION_ENDINGS)
        # by index of a literal or pattern of the prefilter, the places in `rules` of the rules that have it
        of_found: list[list[int]] = [[] for _ in range(len(prefilter.literals) + len(prefilter.patterns))]
        unlooked: list[tuple[bytes, int]] = []  # the rules whose literal the prefilter does not look for
        for place, rule in enumerate(rules):
            literal = rule.match.encode()
            if literal in index:
                of_found[index[literal]].append(place)
            else:
                unlooked.append((literal, place))
        self._of_found = tuple(map(tuple, of_found))
        self._unlooked = tuple(unlooked)
        # the rules of each set of findings as `of` keys it, and whether the line holds no exception ending (a
        # startup's lines hold a few sets, over and over)
        self._made: dict[tuple[int, ...], tuple[tuple[Rule, ...], bool]] = {}

    def of(self, found: list[int], line: bytes) -> tuple[tuple[Rule, ...], bool]:
        """The rules (in order) whose literal `line` may hold, the prefilter having found `found` in it; and
        whether `line` holds none of `EXCEPTION_ENDINGS` (the prefilter found none)."""
        key = tuple(found)
        for literal, place in self._unlooked:
            if line.find(literal) >= 0:
                key += (~place,)  # a rule the prefilter does not look for, whose literal the line holds
        made = self._made.get(key)
        if made is None:
            of_found = self._of_found
            places = {i for f in key for i in (of_found[f] if f >= 0 else (~f,))}
            made = tuple(self._rules[i] for i in sorted(places)), self._endings.isdisjoint(found)
            if len(self._made) >= _MADE_MAX:
                self._made.clear()
            self._made[key] = made
        return made


_MADE_MAX = 4096


_NO_RULES = _RuleSet(Prefilter(()), (), ())


def make_databases(profile: Profile) -> None:
    """Compile every Hyperscan database a launch of `profile` may read with (each rule set's prefilter, and its
    scanner's), keeping none: made ahead, in a worker thread, for the prefilter's store (`keep_databases`) to keep;
    a launch then loads each where it would compile it (in the daemon: in the event loop, 10 to 130 ms each)."""
    for settled in _RULE_SETS:
        make_scanner_databases(_rule_set.__wrapped__(profile, settled).rules)


@functools.lru_cache(maxsize=64)
def _rule_set(profile: Profile, settled: str) -> _RuleSet:
    # A profile's rules of one of _RULE_SETS, and their prefilter; the same for every launch of an engine, and
    # asked twice an incarnation in a crash loop. A serving rule's literal makes a line a serving line only
    # where no other rule of the set has it (SGLang's "Decode batch" is also a ready marker while starting).
    dropped = _RULE_SETS[settled]
    rules = [r for r in profile.rules if r.kind not in dropped]
    literals = (r.match.encode() for r in rules if r.kind != "serving")
    endings = (
        e.encode() for e in EXCEPTION_ENDINGS
    )  # "KeyboardInterrupt", "StopIteration": an exception line
    others = Prefilter((*literals, *_ERROR_WORDS, *endings), ERROR_LEVEL_MARKS)
    serving = tuple(
        (r.request, r.match.encode(), re.compile(lazy_gaps(r.regex.pattern.encode())) if r.regex else None)
        for r in rules
        if r.kind == "serving"
    )
    one_line = all(match for _, match, _ in serving)
    counts = tuple(
        (
            match,
            regex,
            _tokens(regex),
            regex.groupindex["running"] - 1,
            regex.groupindex["waiting"] - 1,
        )
        if regex is not None and not request and set(regex.groupindex) >= _COUNTS
        else (match, None, (), 0, 0)
        for request, match, regex in serving
    )
    read = tuple(r for r in rules if r.kind != "benign")
    blind = (
        others.engine == "hyperscan"
        and not any(map(has_digit, others.literals))
        and all(map(digit_blind, others.patterns))
        and not any(has_digit(match) for _, match, _ in serving)
        and all(regex is None or digit_blind(regex.pattern) for _, regex, _, _, _ in counts)
    )
    plans: dict[bytes, _Plan] | None = {} if blind else None
    return _RuleSet(others, serving, read, one_line, counts, _Candidates(read, others), plans)


def _plan(data: bytes, rules: _RuleSet, key: bytes) -> _Plan:
    # `_one_line`'s plan of the line `data` (its newline last), kept for its template `key`: what it tells depends on
    # where the literals, the patterns and the count regexes match, which is where they match in the template (each
    # tells no digit from another), and on whether bytes that `template` keeps are there (not ASCII, CR, ESC)
    plans = rules.plans
    assert plans is not None  # the rule set reads templates
    hits = rules.others.found_in_line(data)
    assert hits is not None  # with Hyperscan
    place = -1
    for i, (_, match, _) in enumerate(rules.serving):
        if data.find(match) >= 0:
            place = i
            break
    spans = _count_spans(data[:-1], rules.counts, place) if place >= 0 and not hits else None
    plan = (hits, place, spans, _plain(key[:-1]))
    if len(key) <= TEMPLATE_BYTES:  # (a longer line is mostly one of a kind: not kept)
        if len(plans) >= TEMPLATES_MAX:
            plans.clear()
        plans[key] = plan
    return plan


def _plain(template: bytes) -> bool:
    # Whether every line of `template` (its newline cut) reads as its bytes decoded, one record: `clean` keeps it
    # (`clean_keeps`) and `unglue` finds no record's start in it. What `unglue` looks for tells no digit from another
    # (its regexes are digit-blind, its literals hold no digit): it finds in a line what it finds in its template.
    if not clean_keeps(template):
        return False
    text = template.decode("ascii")
    return len(unglue(text)) == 1


def _plain_line(raw: bytes) -> bool:
    # `_plain` of the line `raw` (no newline) by its template, kept for it (`TEMPLATES_MAX` of them, none longer than
    # `TEMPLATE_BYTES`): a crash loop's tracebacks and startups repeat their lines' templates
    return len(raw) < TEMPLATE_BYTES and _plain_kept(raw.translate(ZEROED))


_plain_kept = functools.lru_cache(maxsize=TEMPLATES_MAX)(_plain)


def _count_spans(raw: bytes, rules: tuple[_CountRule, ...], first: int) -> _Spans | None:
    # `_parks` of `raw` but for the state of its requests and the values of its counts: where its counts are, or
    # None where the line may not wait whatever they are (`first`: as `_parks`'s)
    if not raw.isascii() or 13 in raw or 27 in raw:  # CR, ESC
        return None
    hit = rules[first]
    for rule in rules[first + 1 :]:
        if raw.find(rule[0]) >= 0:
            return None  # two rules' lines in one: read it
    if hit[1] is None or raw.count(hit[0]) != 1:
        return None
    m = hit[1].search(raw)
    if m is None:
        return None
    running, waiting = m.span(hit[3] + 1), m.span(hit[4] + 1)  # (-1, -1): the group took no part
    if (
        running[0] < 0
        or waiting[0] < 0
        or not raw[slice(*running)].isdigit()
        or not raw[slice(*waiting)].isdigit()
    ):
        return None
    tokens = tuple(m.span(place + 1) for place in hit[2] if m.span(place + 1)[0] >= 0)
    for a, b in tokens:
        value = raw[a:b]
        try:
            float(value.replace(b",", b"") if 44 in value else value)
        except ValueError:
            return None
    return (*running, *waiting, tokens)


_COUNTS = frozenset({"running", "waiting"})  # a serving line of counts tells both (see `_parks`)


def _tokens(regex: re.Pattern[bytes]) -> tuple[int, ...]:
    # the places in a match's `groups()` of the groups of a serving rule's regex that count tokens, in the order
    # `scanner._serving` sums them
    return tuple(regex.groupindex[name] - 1 for name in ("tokens", "prompt") if name in regex.groupindex)


# where `lazy_gaps` looks: a `.*?` (not escaped: after an even run of backslashes) followed by one literal character
# (a plain one, or one escaped) that no quantifier follows, outside a character class; and a class, to pass over it
_GAP = re.compile(
    rb"(?<!\\)((?:\\\\)*)\.\*\?((?:\\[^0-9A-Za-z]|[^\\.^$*+?{}\[\]|()])(?![*+?{]))|(?<!\\)((?:\\\\)*)\["
)


def lazy_gaps(pattern: bytes) -> bytes:
    """`pattern` with each `.*?` that a literal character follows written so that Python's regex engine skips
    to each place of that character, where the lazy gap tried every position in turn (about 150 instructions a
    byte): `[^c\n]*+(?:c[^c\n]*+)*?` tries exactly the places where the character `c` is, in order, and only
    there can what follows match; every match (its span, its groups) is the same. A pattern with inline flags
    (`.` across newlines, letters of either case) is left as it is."""
    if re.search(rb"\(\?[aiLmsux-]", pattern):
        return pattern
    out, pos = [], 0
    while (m := _GAP.search(pattern, pos)) is not None:
        if m[3] is not None:  # a character class: passed over whole
            end = _class_end(pattern, m.end())
            if end < 0:
                return pattern
            out.append(pattern[pos:end])
            pos = end
            continue
        char = m[2][-1:]
        c = re.escape(char)
        out.append(pattern[pos : m.start()] + m[1] + b"[^%s\\n]*+(?:%s[^%s\\n]*+)*?" % (c, c, c) + m[2])
        pos = m.end()
    return b"".join(out) + pattern[pos:]


def _class_end(pattern: bytes, at: int) -> int:
    # the end of the character class whose first character (after its "[") is at `at`; -1: none
    if pattern[at : at + 1] == b"^":
        at += 1
    if pattern[at : at + 1] == b"]":
        at += 1  # a "]" first is the class's own
    while at < len(pattern):
        c = pattern[at]
        if c == 0x5C:  # a backslash: the next character is escaped
            at += 2
        elif c == 0x5D:  # "]"
            return at + 1
        else:
            at += 1
    return -1


def _newlines(data: bytes, lo: int, hi: int) -> int:
    # The newlines in data[lo:hi]. `bytes.count` is a byte loop (about 3 GB/s); `bytes.replace` finds them with
    # memchr, about twice as fast (CPython 3.11-3.13) for one copy of the buffer: worth it over most of a big
    # block (a replay's megabyte of serving lines), where the copy's memory is reused from one block to the next.
    if hi - lo < 1 << 16 or hi - lo < len(data) // 2:
        return data.count(b"\n", lo, hi)
    outside = data.count(b"\n", 0, lo) + data.count(b"\n", hi)
    return len(data) - len(data.replace(b"\n", b"")) - outside


def _serving_status(raw: bytes, rules: tuple[_ServingRule, ...]) -> str | None:
    # What a serving line tells at a glance: "flowing" (tokens came), "idle" (no request), "stuck" (requests, no
    # token), "request" (one request's line: always read whole), "unknown" (read it whole); None: no rule's
    for request, match, regex in rules:
        if raw.find(match) < 0:
            continue
        m = regex.search(raw) if regex is not None else None
        if regex is not None and m is None:
            continue
        if request or m is None:
            return "request"
        groups = m.groupdict()
        try:
            made = sum(float(groups[k] or 0) for k in ("tokens", "prompt") if k in groups)
            load = sum(int(groups[k] or 0) for k in ("running", "waiting") if k in groups)
        except ValueError:
            return "unknown"
        return "flowing" if made > 0 else "idle" if load == 0 else "stuck"
    return "unknown" if any(raw.find(match) >= 0 for _, match, _ in rules) else None


def _breaks(data: bytes) -> bool:
    # whether `data` holds a character but the newline that `splitlines` breaks at: CR, VT, FF, FS, GS, RS (a byte's
    # value `in` bytes: a memchr)
    return 13 in data or 11 in data or 12 in data or 28 in data or 29 in data or 30 in data


def _earlier(a: float | None, b: float) -> float:
    return b if a is None or b < a else a


def _first_line(data: bytes) -> LaunchStarted:
    # The log's first line starts the launch's clock, whatever marker comes later and however the bytes
    # were chunked (an excerpt, or --log-level warning, may show no start marker at all).
    raw = data[: data.find(b"\n")]
    for seg in split_line(0, raw):
        for piece in unglue(seg.text):
            rec = parse(piece)
            if rec.at is not None:
                return LaunchStarted(1, rec.at, rec.seconds)
    return LaunchStarted(1, None, None)
