"""Scanning: one log record -> its events, by the profile's rules and the traceback assembler (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from watchdog.core.arguments import argument, parse_arguments, unclosed
from watchdog.core.categories import categorize, phase_from_frames
from watchdog.core.envelope import Record
from watchdog.core.findings import (
    ArgumentsFound,
    DyingWords,
    ErrorSeen,
    Event,
    FactFound,
    LaunchStarted,
    PhaseReached,
    ProgressMade,
    ReadyReached,
    RequestServed,
    ServingSeen,
    StopSeen,
)
from watchdog.core.prefilter import Literals
from watchdog.core.rootcause import Candidate, from_traceback
from watchdog.core.tracebacks import EXCEPTION_LINE, TRACEBACK_HEADER, Assembler, Traceback
from watchdog.profiles.model import Profile, Rule
from watchdog.vocabulary import BAR_OF_PHASE, PROGRESS_STATES, WEAK_CATEGORIES, State

__all__ = ["QUIET_LEVELS", "Scanner", "make_databases"]

QUIET_LEVELS = frozenset({"WARNING", "INFO", "DEBUG", "TRACE", "NOTICE"})
# a line of a pretty dump after its first: indented (`    model_id: "x",`), or a closing bracket (`}`)
_DUMP_REST = re.compile(r"\s|[)\]}>]|$")
_DUMP_LINES = 300  # lines an argument dump over many lines may take (TGI's Args: one an argument, ~60)
# A Rust panic since Rust 1.73: "thread 'main' panicked at src/server.rs:51:21:" ends the line with its location,
# and the panic's message is the next line (the Rust routers of SGLang and vLLM, TGI's launcher and router)
_PANIC_AT = re.compile(r"^thread '[^']*' panicked at \S+:\d+:\d+:$")
_PANICKED = "' panicked at "  # what every line `_PANIC_AT` matches holds


class Scanner:
    """Reads records in log order with a set of rules; see the module docstring."""

    def __init__(self, *, literal_pass: bool = True) -> None:
        """`literal_pass`: a record is matched only with the rules whose literal it holds, found in one pass
        (Hyperscan); False: each rule's literal is looked for in turn (the reference the tests hold it to)."""
        self._literal_pass = literal_pass
        self.assembler = Assembler()
        self._rules: tuple[Rule, ...] = ()
        self._candidates: _Candidates | None = None
        self._serving_rules: tuple[Rule, ...] = ()
        self.benign: tuple[Rule, ...] = ()
        self.profile = Profile("generic")  # the profile the rules are of: what its tracebacks' frames tell
        self.last_relevant = ""  # the last line a rule matched: the live view shows it
        self.benign_lines = 0  # records a benign rule matched: idle chatter, not activity
        self.error_lines = 0  # records that were part of a traceback or an error: not healthy activity
        self._annotations: dict[int, Rule] = {}  # exception-line number -> the error rule that matched it
        # an argument dump over many lines, its lines so far: (its rule, its lines, its first line's number)
        self._dump: tuple[Rule, list[str], int] | None = None
        self._panic = False  # the last record was a Rust panic's location line: this one is its message
        # the last traceback read into a candidate (`_traceback`): what `from_traceback` reads of it, the profile it
        # was read with, and what it made
        self._read: tuple[tuple[object, ...], Profile, Candidate | None] | None = None

    def reset(self) -> None:
        """Forget open tracebacks: the file was replaced, what follows is another file."""
        self.assembler = Assembler()
        self._annotations.clear()
        self._dump = None
        self._panic = False

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule but the benign ones, in profile order."""
        return self._rules

    @rules.setter
    def rules(self, rules: tuple[Rule, ...]) -> None:
        # made once a rule set (a crash loop changes sets twice an incarnation: ~100 rules looked over each time)
        self._rules, self._candidates, self._serving_rules = rules, *_made(rules, self._literal_pass)

    @property
    def collecting(self) -> bool:
        """True while an argument dump over many lines is open, or a Rust panic's message is next: every line must
        then be scanned."""
        return self._dump is not None or self._panic

    @property
    def busy(self) -> bool:
        """True while a traceback is open: every line must then be scanned."""
        return self.assembler.busy

    @property
    def reads_all(self) -> bool:
        """True while every line must be scanned: a traceback, a chain of them or an argument dump is open, or a
        Rust panic's message is the next line."""
        return self.assembler.busy_or_chaining or self._dump is not None or self._panic

    @property
    def awaiting_exception(self) -> bool:
        """True while an open traceback's exception line (what it says went wrong) has not come yet."""
        return self.assembler.awaiting_exception

    def scan(
        self,
        rec: Record,
        line_no: int,
        phase: State,
        candidates: Sequence[Rule] | None = None,
        *,
        unexcepted: bool = False,
    ) -> list[Event]:
        """The events of one record; `phase` names a bare progress bar ("@phase" rules). `candidates`: the rules,
        in order, that the caller vouches are all those whose literal the content may hold (found in the line it
        is of, in one pass with the caller's own); None: they are looked for here. `unexcepted`: the caller
        vouches that the content holds none of `EXCEPTION_ENDINGS` (found so in that pass): it is no exception
        line, which is then not looked for."""
        out: list[Event] = []
        content = rec.content
        if self._dump is not None:
            if _DUMP_REST.match(content):
                return self._dump_line(content)
            # a line neither indented nor closing a bracket is the log's next record, not the dump's: the dump
            # was cut short there (its arguments so far are kept), and this line is read as any other
            out += self._dump_end()
        for r in self.benign:  # a loop, not `any` of a generator: asked of every line read whole
            if r.match in content and r.apply(content) is not None:
                self.benign_lines += 1
                return out
        consumed, done = self.assembler.feed(rec, line_no)
        for tb in done:
            out += self._traceback(tb)
        # the regex only where its words are (one look for them in C, not a match started at every line)
        panic_message, self._panic = (
            self._panic,
            _PANICKED in content and _PANIC_AT.match(content.strip()) is not None,
        )
        errors_before = len(out)
        matched_error = False
        if candidates is None:
            candidates = self._rules if self._candidates is None else self._candidates.of(content)
        for rule in candidates:
            if rule.match not in content:
                continue
            groups = rule.apply(content)
            if groups is None:
                continue
            kind = rule.kind
            if kind != "dying":  # dying words are no line of the launch: the one before them stays last
                self.last_relevant = content.strip()
            if kind == "error":
                matched_error = True
                if consumed:
                    if self.assembler.code:
                        continue  # a frame's source line: code that may spell the message, not the message
                    if EXCEPTION_LINE.match(content.strip()):
                        self._annotations[line_no] = rule  # the traceback's own candidate carries it
                        continue
                    if (
                        not rule.fatal
                        and TRACEBACK_HEADER not in content
                        and not _carried_cause(rule, self.assembler)
                    ):
                        continue  # a frame or message line of a traceback: the traceback speaks for it
                if rule.fatal:
                    # The launch ends now: tracebacks complete but for their last line go first, so that
                    # the root-cause choice sees them.
                    for tb in self.assembler.flush(complete_only=True):
                        out += self._traceback(tb)
                # made whole (not `replace`d after: ~650 opcodes a crash's wrapper line)
                cand = _rule_candidate(rule, rec, line_no, groups, self._in_request(content))
                out.append(ErrorSeen(cand))
            elif kind == "phase" and rule.state:
                out.append(PhaseReached(rule.state, line_no, rec.at, rec.seconds, rec.source))
            elif kind == "progress":
                out += _progress(rule, groups, line_no, rec, phase)
            elif kind == "fact":
                out += [FactFound(name, _number(value), line_no) for name, value in groups.items()]
            elif kind == "ready":
                out.append(
                    ReadyReached(line_no, rec.at, rec.seconds, early=rule.early, confirm_due=rule.confirm_due)
                )
            elif kind == "start":
                out.append(LaunchStarted(line_no, rec.at, rec.seconds, marker=True))
            elif kind == "stop":
                out.append(StopSeen(line_no, rec.at, after_ready=rule.state == "ready"))
            elif kind == "dying":
                self.benign_lines += 1  # no activity: the process is going away
                out.append(DyingWords(line_no, rec.at, content.strip(), self.last_relevant, rule.clean_exit))
            elif kind == "served":
                status = groups.get("status", "")
                out.append(
                    RequestServed(
                        line_no, int(status) if status.isdigit() else None, groups.get("path") or None
                    )
                )
            elif kind == "arguments":
                out += self._arguments(rule, groups, line_no)
            elif kind == "serving":
                out.append(_serving(rule, groups, line_no, rec))
        if matched_error:
            # An error line is no progress, whatever marker it also carries ("llama_new_context_with_model:
            # failed to allocate compute buffers"): read as progress it would settle as survived the error just
            # before it (the cudaMalloc that failed), which is its cause. The phase it names was reached.
            out[errors_before:] = [
                replace(e, progress=False) if isinstance(e, PhaseReached) else e for e in out[errors_before:]
            ]
        # an error rule's line made an ErrorSeen (only such a line makes one here)
        if consumed or (matched_error and any(isinstance(e, ErrorSeen) for e in out[errors_before:])):
            self.error_lines += 1
        excepted = self.assembler.excepted
        if excepted is not None:
            # Reported the moment its exception line is complete; reported again, whole, when it closes.
            out += self._traceback(excepted, provisional=True)
        if consumed or matched_error:
            return out
        stripped = content.strip()
        if panic_message and stripped:
            # the panic's own words, whatever the profile's rule for its location line said (a wrapper's)
            out.append(ErrorSeen(Candidate(stripped, line_no, rec.source, at=rec.at, kind="exception")))
            self.error_lines += 1
            return out
        m = None if unexcepted else EXCEPTION_LINE.match(stripped)
        if m and rec.level not in QUIET_LEVELS:
            exc = m.group("exc")
            cand = Candidate(
                stripped,
                line_no,
                rec.source,
                exception=exc,
                at=rec.at,
                kind="exception",
                in_request=self._in_request(stripped),
                # with no frames, its own words may name the step, as a [[frame]] table reads them in a traceback
                # (SGLang's 'Capture cuda graph failed: ...' where Ray's job summary kept the last lines only)
                phase_hint=phase_from_frames(stripped, self.profile),
            )
            out.append(ErrorSeen(cand))
            self.error_lines += 1
        elif (
            rec.level in ("ERROR", "CRITICAL")
            and categorize(stripped, rules=self.profile.categories) not in WEAK_CATEGORIES
        ):
            out.append(ErrorSeen(Candidate(stripped, line_no, rec.source, at=rec.at, kind="log")))
            self.error_lines += 1
        return out

    def scan_serving(self, rec: Record, line_no: int) -> list[Event] | None:
        """`scan` of a record whose line the caller vouches holds no literal of a rule but the serving ones, of a
        benign rule, nor any error or traceback word (the analyzer's prefilter passed it over): only a serving
        rule can match it. None (nothing done): the record reads as an error after all (an exception line, an
        error level), or every line is being read; `scan` it."""
        content = rec.content
        stripped = content.strip()
        if self.reads_all or rec.level in ("ERROR", "CRITICAL") or EXCEPTION_LINE.match(stripped):
            return None
        # what `scan` does with such a line: no traceback takes it, no rule but a serving one matches it
        self.assembler.excepted = None
        out: list[Event] = []
        for rule in self._serving_rules:
            groups = rule.apply(content)  # None at once without its literal
            if groups is not None:
                self.last_relevant = stripped
                out.append(_serving(rule, groups, line_no, rec))
        return out

    def _in_request(self, text: str) -> bool:
        # a request's own error by its words (the profile's [[request]]), where no frame says so
        return any(p.search(text) for p in self.profile.requests)

    def _arguments(self, rule: Rule, groups: dict[str, str], line_no: int) -> list[Event]:
        if rule.syntax == "line":
            if "name" not in groups or "value" not in groups:
                return []
            return [ArgumentsFound((argument(groups["name"], groups["value"], flags=rule.flags),), line_no)]
        text = groups.get("args", "")
        if rule.syntax != "argv" and unclosed(text):
            self._dump = (rule, [text], line_no)  # the rest comes in the next lines
            return []
        return [ArgumentsFound(parse_arguments(text, rule.syntax, flags=rule.flags), line_no)]

    def _dump_line(self, content: str) -> list[Event]:
        # the next line of an argument dump over many lines: once its brackets close, its arguments
        assert self._dump is not None  # called while collecting
        lines = self._dump[1]
        lines.append(content)
        if len(lines) < _DUMP_LINES and unclosed("\n".join(lines)):
            return []
        return self._dump_end()

    def _dump_end(self) -> list[Event]:
        assert self._dump is not None  # called while collecting
        rule, lines, line_no = self._dump
        self._dump = None
        return [ArgumentsFound(parse_arguments("\n".join(lines), rule.syntax, flags=rule.flags), line_no)]

    def flush(self) -> list[Event]:
        """End of log: the tracebacks still open (cut: the log ends inside them)."""
        out: list[Event] = []
        for tb in self.assembler.flush():
            out += self._traceback(tb, cut=True)
        return out

    def open_tracebacks(self, *, cut: bool = False) -> list[Event]:
        """The tracebacks still open, as far as they go (they stay open); `cut`: as if the log ended here."""
        out: list[Event] = []
        for tb in self.assembler.open():
            # one already reported cut is, while it stays open without its exception line, cut still (a crash
            # report going out re-reads it as far as it goes, it did not go on): reported as such again, with
            # whatever frames came since, never as a fragment that would replace the cut report by nothing
            still_cut = cut or (tb.reported_cut and tb.exception is None)
            tb.reported_cut = tb.reported_cut or cut
            out += self._traceback(tb, provisional=True, cut=still_cut)
        return out

    def _traceback(self, tb: Traceback, *, provisional: bool = False, cut: bool = False) -> list[Event]:
        # A traceback is read at its exception line and again, whole, when the next line closes it: mostly unchanged
        # (nothing came after its exception line), and then its candidate is the one made already (`from_traceback`
        # reads no more of it than `read`, and the candidate is frozen)
        read = (
            tuple(tb.lines),
            tb.exc_index,
            tb.exc_line_no,
            tb.line,
            tb.source,
            tb.at,
            tb.header,
            tb.noise,
            tb.ignored,
            tb.chained,
            tb.handling,
            cut,
        )
        last = self._read
        if last is not None and last[1] is self.profile and last[0] == read:
            cand = last[2]
        else:
            cand = from_traceback(tb, self.profile, cut=cut)
            self._read = (read, self.profile, cand)
        if tb.reported_cut and not cut:
            # it was reported as cut, and went on after all: what it turned out to be replaces that report
            if cand is None:
                cand = Candidate("", tb.line, tb.source, noise=True)
            cand = replace(cand, kind="traceback", opened=tb.line)
        if cand is None:
            return []
        rule = self._annotations.get(cand.line) if provisional else self._annotations.pop(cand.line, None)
        level = tb.body_style[0] if tb.body_style is not None else tb.header_level
        if level in QUIET_LEVELS:
            # a traceback logged at WARNING or below was survived; before its body comes, its header's own
            # record says it (a log that goes quiet, or ends, right after a WARNING record's "Traceback" line)
            cand = replace(cand, noise=True, fatal=False)
        if rule is not None:
            cand = replace(
                cand,
                role=rule.role,
                category=rule.category,
                phase_hint=_later(rule.state, cand.phase_hint),
                hint=rule.hint,
                fatal=rule.fatal or cand.fatal,
            )
        return [ErrorSeen(cand)]


_PHASE_ORDER = tuple(s.value for s in PROGRESS_STATES)


def _later(a: str | None, b: str | None) -> str | None:
    # two pieces of evidence of a phase: the crash happened in the later one
    if a is None or b is None:
        return a or b
    return max(a, b, key=lambda p: _PHASE_ORDER.index(p) if p in _PHASE_ORDER else -1)


def _carried_cause(rule: Rule, assembler: Assembler) -> bool:
    # A line the exception's message goes on over that a rule knows as a cause of its own class: a runtime's report
    # that a wrapper's message carries below its first line (torch_npu's 'The Inner error is reported as above.'
    # under an engine's 'RuntimeError: Dummy run failed: ...', then CANN's 'Memory_Allocation_Failure(EL0004): ...').
    # Its own candidate: where the exception says what failed, it comes first in the log and wins (`rank`); where it
    # says nothing known (other), the carried cause is the decisive line.
    return assembler.message and rule.role == "cause" and rule.category is not None


def _rule_candidate(
    rule: Rule, rec: Record, line_no: int, groups: dict[str, str], in_request: bool
) -> Candidate:
    # "Scheduler hit an exception: Traceback (most recent call last):" -> "Scheduler hit an exception";
    # a rule's `what` group is the part of the line that names the error (after a runtime's preamble)
    summary = rec.content.split(TRACEBACK_HEADER, 1)[0].strip().rstrip(":").strip() or rec.content.strip()
    if groups.get("what"):
        summary = groups["what"].strip()
    return Candidate(
        summary=summary,
        line=line_no,
        source=rec.source,
        role=rule.role,
        category=rule.category,
        hint=rule.hint,
        fatal=rule.fatal,
        survivable=rule.survivable,
        # fatal while starting, as an exception out of a startup step (`Lifecycle._fatal`)
        startup_step=rule.fatal_starting,
        phase_hint=rule.state,
        at=rec.at,
        kind="rule",
        in_request=in_request,
    )


def _progress(rule: Rule, groups: dict[str, str], line_no: int, rec: Record, phase: State) -> list[Event]:
    out: list[Event] = []
    if rule.state:
        out.append(PhaseReached(rule.state, line_no, rec.at, rec.seconds, rec.source))
    name = rule.name or "progress"
    if name == "@phase":
        name = BAR_OF_PHASE.get(phase, phase.value)
    if "percent" in groups:
        done, total = round(float(groups["percent"])), 100
    else:
        done, total = int(groups["done"]), int(groups["total"])
    if 0 <= done <= total:
        out.append(ProgressMade(name, done, total, line_no, rec.source))
    return out


# what a count reads as (`_number`), a tuple: `int | float` is a union made again at each call (a serving line's)
_NUMBER = (int, float)


def _serving(rule: Rule, groups: dict[str, str], line_no: int, rec: Record) -> ServingSeen:
    # a [[serving]] rule's line: its counts (tokens: generated and prefilled alike, either is progress; summed
    # from 0, as `sum` adds them). A group that took no part is not in `groups`: `get` is None for it.
    get = groups.get
    text = get("running")
    running = _number(text) if text is not None else None
    text = get("waiting")
    waiting = _number(text) if text is not None else None
    made: float | None = None
    for name in ("tokens", "prompt"):
        value = get(name)
        if value is not None and isinstance(number := _number(value), _NUMBER):
            made = (0 if made is None else made) + float(number)
    return ServingSeen(
        line_no,
        rec.at,
        rec.seconds,
        request=rule.request,
        key=get("slot", ""),
        running=int(running) if isinstance(running, _NUMBER) else None,
        waiting=int(waiting) if isinstance(waiting, _NUMBER) else None,
        tokens=made,
    )


def _number(value: str) -> int | float | str:
    # a count is an integer (`kv_cache_tokens` 402000, not 402000.0 nor 4.02e+05 in text); a measure a float
    text = value.replace(",", "")
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return value


class _Candidates:
    """The rules of a set that a content may match: those whose literal it holds (Hyperscan finds them in one
    pass), in the set's order; the rules with an empty literal always."""

    def __init__(self, rules: tuple[Rule, ...], literals: Literals) -> None:
        self._rules = rules
        self._literals = literals
        index = {literal: i for i, literal in enumerate(literals.literals)}
        self._of_literal: list[list[int]] = [[] for _ in literals.literals]
        self._always: list[int] = []
        for position, rule in enumerate(rules):
            if rule.match:
                self._of_literal[index[rule.match]].append(position)
            else:
                self._always.append(position)

    def of(self, content: str) -> tuple[Rule, ...] | list[Rule]:
        """The candidate rules for `content`, in order."""
        found = self._literals.found(content)
        if found is None:
            return self._rules
        if not found and not self._always:
            return ()
        of_literal = self._of_literal
        if len(found) == 1 and not self._always:
            return [self._rules[i] for i in of_literal[found[0]]]
        positions = sorted({i for f in found for i in of_literal[f]} | set(self._always))
        return [self._rules[i] for i in positions]


def _made(rules: tuple[Rule, ...], literal_pass: bool) -> tuple[_Candidates | None, tuple[Rule, ...]]:
    # The same rule sets for every launch of an engine (the analyzer's `_rule_set`, which keeps them): their
    # candidates (with `literal_pass`) and serving rules made once each, known by identity (hashing ~100 rules at
    # each change of set would cost more than it saves).
    known = _MADE.get((id(rules), literal_pass))
    if known is not None and known[0] is rules:
        return known[1], known[2]
    made = _candidates(rules) if literal_pass else None
    serving = tuple(r for r in rules if r.kind == "serving")
    if len(_MADE) >= 64:
        _MADE.clear()
    _MADE[(id(rules), literal_pass)] = (rules, made, serving)
    return made, serving


def make_databases(rules: tuple[Rule, ...]) -> None:
    """Compile the database a scanner of `rules` finds its candidate rules with, keeping none: made ahead for the
    prefilter's store (`watchdog.core.prefilter.keep_databases`) to keep, and a scanner to load."""
    _candidates(rules)


def _candidates(rules: tuple[Rule, ...]) -> _Candidates | None:
    literals = Literals(r.match for r in rules if r.match)
    # no Hyperscan (or no literal): each rule's literal is looked for in turn
    return None if not literals.literals or literals.found("") is None else _Candidates(rules, literals)


_MADE: dict[tuple[int, bool], tuple[tuple[Rule, ...], _Candidates | None, tuple[Rule, ...]]] = {}
