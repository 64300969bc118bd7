"""Error analysis: from the error lines and tracebacks of a launch, the root cause, its ranks and a hint (pure).

The root cause is the decisive error: not a wrapper that points elsewhere, not logging noise; identical
errors from many ranks are one error with the list of ranks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from watchdog.core.categories import (
    answers_of,
    categorize,
    fill,
    hint_for,
    phase_from_error,
    phase_from_frames,
)
from watchdog.core.tracebacks import EXCEPTION_LINE, Traceback
from watchdog.profiles.model import Profile, Searched
from watchdog.vocabulary import GENERIC_CATEGORIES, Category

__all__ = ["Candidate", "Error", "Rank", "from_traceback", "rank", "root_cause"]

_MASK = re.compile(r"\d+")
_MAX_SUMMARY = 500
# a traceback's frame line: its file, line and function
_FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<fn>[\w<>]+)')


@dataclass(frozen=True, slots=True)
class Candidate:
    """One error seen in the log: a traceback's exception, a standalone exception line, or an error rule hit."""

    summary: str  # the decisive line, wrappers peeled
    line: int
    source: str = ""
    exception: str | None = None  # "RuntimeError"
    traceback: tuple[str, ...] = ()
    role: str = "cause"  # "cause" | "wrapper"
    noise: bool = False  # inside a logging-error block
    category: Category | None = None  # set by a rule; else derived from the summary
    hint: str | None = None  # set by a rule: a template formatted with the facts when chosen
    fatal: bool = False
    survivable: bool = False  # set by a rule: the engine may go on from it (a retry)
    phase_hint: str | None = None  # phase the traceback's frames point at
    at: str | None = None
    chained: bool = False  # the effect of the previous traceback of its stream
    handling: bool = False  # ... raised while handling it: the exception that ended the process
    startup_step: bool = False  # raised out of a startup step no engine survives: fatal while starting
    kind: str = "traceback"  # "traceback" | "exception" | "rule" | "log"
    opened: int = 0  # for a traceback: the line it began on (its reports, cut or whole, share it)
    in_request: bool = False  # raised in a request's handler (the profile's [[request]]): answered to it
    ignored: bool = False  # printed by CPython's unraisable hook and ignored (`Traceback.ignored`): noise


@dataclass(frozen=True, slots=True)
class Error:
    """The verdict's error: the JSON `error` object of DESIGN.md."""

    category: Category
    summary: str
    exception: str | None
    hint: str
    ranks: tuple[str, ...]
    line: int
    traceback: tuple[str, ...]
    phase_hint: str | None = None  # the phase its traceback's frames point at
    step_phase: str | None = None  # the phase of the startup step it was raised out of (profile `[[step]]`)
    elsewhere: bool = False  # a wrapper: what it points at (another process's report) may still be coming
    # the news that another part went away (the profile's [[consequence]]: a peer's closed connection, a
    # collective's timeout): on a node of a multi-node launch, never the first failure while another node has a cause
    consequence: bool = False

    def to_json(self) -> dict[str, object]:
        """The `error` object of the JSON contract."""
        return {
            "category": self.category,
            "summary": self.summary,
            "exception": self.exception,
            "hint": self.hint,
            "ranks": list(self.ranks),
            "line": self.line,
            "traceback": list(self.traceback),
        }


def _caught_by_header(tb: Traceback, profile: Profile) -> bool:
    # the words a logger put before the traceback on its opening line, known to a [[caught]] rule as a traceback
    # logged and survived (TensorRT-LLM's "Fallback to regular model init: Traceback ..."), cut or whole
    return bool(tb.header) and any(p.search(tb.header) for p in profile.caught)


def _caught_by_frames(text: str, profile: Profile) -> bool:
    # a function in the traceback that a [[caught]] rule knows logs what it caught and goes on
    return any(p.search(text) for p in profile.caught)


def _caught(tb: Traceback, text: str, profile: Profile) -> bool:
    # a traceback a [[caught]] rule knows as logged and survived: by a function in it, or by its header's words
    return _caught_by_header(tb, profile) or _caught_by_frames(text, profile)


def from_traceback(tb: Traceback, profile: Profile, *, cut: bool = False) -> Candidate | None:
    """A candidate from an assembled traceback, read with what `profile` knows of its frames. One without an
    exception line is noise (or None) when later lines closed it; when the log ends inside it (`cut`), something
    was raised that the log does not show: a wrapper-like error whose frames may still tell the phase, and, as
    those of a whole one, whether the process dies of it (its outermost frame a process's main, or a startup step
    it passes through): its report is then a crash at once, live as in replay."""
    exc_line = tb.exception
    if exc_line is None:
        text = "\n".join(tb.lines)
        # cut: a frame's statement names the call the log lost the frame of (or that only wrappers show)
        hint = phase_from_frames(_with_callees(tb.lines), profile)
        last = _cut_summary(tb.lines)
        if cut and not tb.noise and not _caught_by_header(tb, profile):
            # Its frames are printed outermost first: those that came say where the exception went as the whole
            # traceback would. One whose outermost frame is a process's main, or that passes through a startup
            # step, is as fatal cut as whole: the exception line still to come names the error, it cannot make
            # the process survive it (a [[caught]] function that logged it and went on is its outermost frame).
            held = not _caught_by_frames(text, profile)
            return Candidate(
                (tb.header.rstrip(":") or last)[:_MAX_SUMMARY],
                tb.line,
                tb.source,
                role="wrapper",
                traceback=tuple(tb.lines),
                phase_hint=hint,
                at=tb.at,
                opened=tb.line,
                in_request=_in_request_handler(text, profile),
                startup_step=held and _innermost_step(text, profile) != "",
                fatal=held and _uncaught(tb, profile),
            )
        # A fragment (the log cut it short) names no error, but its frames still tell the phase.
        if hint is None:
            return None
        return Candidate(
            last, tb.line, tb.source, traceback=tuple(tb.lines), noise=True, phase_hint=hint, kind="fragment"
        )
    m = EXCEPTION_LINE.match(exc_line)
    exception = m.group("exc") if m else exc_line.split(":", 1)[0].strip() or None
    summary = exc_line
    detail = _detail(tb) if m and _HEADER_ONLY.search(m.group("msg") or "") else None
    if detail:
        summary = f"{exc_line.rstrip().rstrip(':')}: {detail}"
    elif m and not (m.group("msg") or "").strip():
        stmt = tb.last_statement()
        if stmt and stmt.startswith("assert"):
            summary = f"{exc_line.rstrip(':')}: {stmt}"
        elif exc_line.rstrip().endswith(":") and (first := _detail(tb, parts=1)):
            # "ImportError: " with its message on the next lines (sgl_kernel's multi-line report)
            summary = f"{exc_line.rstrip().rstrip(':')}: {first}"
    text = "\n".join(tb.lines)
    # a traceback through a function that logs it and goes on (a cache that cannot be saved) was survived
    noise = tb.noise or _caught(tb, text, profile)
    return Candidate(
        startup_step=not noise and _innermost_step(text, profile) != "",
        summary=summary[:_MAX_SUMMARY],
        fatal=not noise and _uncaught(tb, profile),
        line=tb.exc_line_no or tb.line,
        source=tb.source,
        exception=exception,
        traceback=tuple(tb.lines),
        noise=noise,
        phase_hint=phase_from_frames(text, profile),
        at=tb.at,
        chained=tb.chained,
        handling=tb.handling,
        opened=tb.line,
        in_request=_in_request_handler(text, profile),
        ignored=tb.ignored,
    )


# a call in a statement: the name called (`scheduler.run_event_loop()`, `dispatch_event_loop(self)`)
_CALL = re.compile(r"(?<![\w.])(?:\w+\.)*(?P<fn>[A-Za-z_]\w*)\(")


def _with_callees(lines: Sequence[str]) -> str:
    # A traceback's text with, under each frame's statement, the call it makes, written as frames are ("in
    # run_event_loop") for the [[frame]] tables: that call is the frame that comes next. Where the log cut the
    # traceback after a statement (SGLang's run_scheduler_process cut at 'scheduler.run_event_loop()' was in
    # the event loop), or where every later frame belongs to no table (a decorator's wrapper: torch's
    # decorate_context under SGLang's `@torch.no_grad()` event_loop_overlap, managers/scheduler.py, sglang PR
    # 4618), the call still says where it was; a deeper frame a table knows comes later and still wins.
    out: list[str] = []
    statement = True
    for line in lines:
        out.append(line)
        if line.lstrip().startswith('File "'):
            statement = False
        elif not statement and line.strip(" ^~\t"):
            statement = True
            out += [f"  in {m['fn']}" for m in _CALL.finditer(line.strip())]
    return "\n".join(out)


def _cut_summary(lines: Sequence[str]) -> str:
    # A traceback the log ends in before its exception line: what it was doing, not its last line (a source line
    # or the carets under one): "a traceback cut before its exception, in step (engine/core.py:226):
    # model_output = self.execute_model(scheduler_output)"
    frame: re.Match[str] | None = None
    statement = ""
    for line in lines:
        if line.lstrip().startswith('File "') and (m := _FRAME.search(line)) is not None:
            frame, statement = m, ""
        elif frame is not None and not statement and line.strip(" ^~\t"):
            statement = line.strip()
    if frame is None:
        return "a traceback cut before its exception"
    where = "/".join(frame["file"].split("/")[-2:])
    said = f"a traceback cut before its exception, in {frame['fn']} ({where}:{frame['line']})"
    return f"{said}: {statement}" if statement else said


def _in_request_handler(text: str, profile: Profile) -> bool:
    # a frame of a request's handler (the profile's [[request]]): the server's HTTP layer catches what is raised
    # there and answers that request with an error status
    return any(p.search(text) for p in profile.requests)


# A message that is only the header of what follows: pydantic's "1 validation error for ModelConfig" (the
# field and what is wrong with it come on the next lines), torch's "Error(s) in loading state_dict for X:".
_HEADER_ONLY = re.compile(r"^\d+ validation errors? for [\w.]+$|:\s*$")
_PYDANTIC_TAIL = re.compile(r"\s*\[type=[^\]]*(?:\]|$)")


def _detail(tb: Traceback, parts: int = 2) -> str | None:
    # The lines after a header-only exception line, up to pydantic's link: "max_model_len: Input should be ..."
    found: list[str] = []
    for text in tb.lines[tb.exc_index + 1 : tb.exc_index + 6]:
        stripped = text.strip()
        if not stripped or stripped.startswith("For further information visit"):
            if found:
                break
            continue
        found.append(_PYDANTIC_TAIL.sub("", stripped))
        if text.startswith("  ") or len(found) == parts:
            break  # a pydantic message line is indented under its field name (an error of the model has none)
    return ": ".join(found) or None


def _innermost_step(text: str, profile: Profile) -> str:
    # the innermost frame of a startup step no engine survives (the engines call them from their process mains
    # with no handler around them) that the traceback passes through (a library's frames below it, torch's or a
    # kernel's, do not hide it)
    steps = profile.steps
    # asked again with the same text at each error the root cause weighs: the answers kept per steps tuple (known
    # by identity, kept beside its answers, as `categories` keeps its rules')
    answers = answers_of(_steps_memo, steps)
    step = answers.get(text)
    if step is None:
        frames = [m.group(0) for m in _FRAME.finditer(text)]
        step = next((f for f in reversed(frames) if any(p.search(f) for p in steps)), "")
        if len(answers) >= _MEMO_TEXTS:
            answers.clear()
        answers[text] = step
    return step


_MEMO_TEXTS = 512  # tracebacks' texts remembered per steps tuple (a few kilobytes each)
_steps_memo: dict[int, tuple[tuple[Searched, ...], dict[str, str]]] = {}


def _uncaught(tb: Traceback, profile: Profile) -> bool:
    """Whether the traceback's outermost frame is a process's main (Python's, multiprocessing's, the engine's
    own that log the error and exit): the process is exiting with it. A thread's or a request handler's is not."""
    outer = next((ln for ln in tb.lines if ln.lstrip().startswith('File "')), None)
    return outer is not None and any(p.search(outer) for p in profile.mains)


_SAME_MESSAGE_PREFIX = 24  # characters two lines share at their start to be copies of one message


def _common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _message(c: Candidate) -> str:
    # The exception's whole message: its line, and the lines it goes on over (a terminal may have wrapped it).
    tb = c.traceback
    for i in range(len(tb) - 1, -1, -1):
        if tb[i].strip() == c.summary.strip():
            return " ".join([c.summary, *(ln.strip() for ln in tb[i + 1 : i + 4])]).strip()
    return c.summary


class Rank(NamedTuple):
    """Where a candidate stands in the choice of the root cause; lower is better, field by field in order
    (each field one feature, tested on its own in tests/test_errors.py)."""

    noise: int  # 1: logging noise, or a traceback logged at warning level or below (it was survived)
    reporter: int  # 1: a logger's header over the traceback it logs (`_reporters`): its exception decides
    consequence: int  # 1: the news that another part went away (EOFError, "cancelled", a broken pipe): even a
    # wrapper tells more ("Worker proc VllmWorker-0 died unexpectedly" names who went away)
    wrapper: int  # 1: a wrapper that only points at an error printed elsewhere ("See root cause above")
    generic: int  # 0: a known category; 1 or 2: killed or other (a wrapper saying "killed" before one saying
    # nothing; a cause saying nothing before a kill, which is the consequence of something)
    logged: int  # 1: an error-level log line that is no exception (it may report one printed in full)
    handled: int  # 1: a traceback the next one of its stream was raised while handling ("During handling")
    chained: int  # 1: raised because of the previous traceback ("direct cause"): its cause goes first
    order: int  # the earliest


def _is_consequence(c: Candidate, profile: Profile) -> bool:
    # the news that another part went away (the profile's [[consequence]]), not what went wrong; or an error
    # raised while tearing down after the failure (the profile's [[teardown]]: a shutdown() or __del__ that
    # finds what never got built)
    # A traceback cut short in a request's handler (the log ends in it) is that request failing too: when the
    # engine died, its requests' reports follow the death.
    # Asked of every candidate at each error the root cause weighs: the answer kept per candidate (frozen), by
    # identity, the candidate and the profile kept beside it so that neither id can be another's
    known = _consequences.get(id(c))
    if known is not None and known[0] is c and known[1] is profile:
        return known[2]
    cut_request = c.in_request and c.role == "wrapper" and c.kind == "traceback"
    answer = any(p.search(c.summary) for p in profile.consequences) or _in_teardown(c, profile) or cut_request
    if len(_consequences) >= _MEMO_CANDIDATES:
        _consequences.clear()
    _consequences[id(c)] = (c, profile, answer)
    return answer


_MEMO_CANDIDATES = 1024  # candidates whose answer is kept (a crash loop's launches' errors)
_consequences: dict[int, tuple[Candidate, Profile, bool]] = {}


def _in_teardown(c: Candidate, profile: Profile) -> bool:
    if not profile.teardowns or not c.traceback:
        return False
    frames = [m.group(0) for m in _FRAME.finditer("\n".join(c.traceback))]
    if not frames:
        return False
    where = f"{frames[-1]}\n{c.summary}"
    return any(p.search(where) for p in profile.teardowns)


def rank(
    c: Candidate,
    category: Category,
    index: int,
    profile: Profile,
    *,
    handled: bool = False,
    reporter: bool = False,
) -> Rank:
    """The rank of candidate `c` (the `index`-th of the log), whose category is `category`, in a log of
    `profile`'s engine; `reporter`: it is a header line whose traceback is in the log (`_reporters`)."""
    wrapper = c.role == "wrapper"
    if category not in GENERIC_CATEGORIES:
        generic = 0
    elif category == Category.KILLED:
        generic = 1 if wrapper else 2
    else:
        generic = 2 if wrapper else 1
    return Rank(
        noise=int(c.noise),
        reporter=int(reporter),
        consequence=int(_is_consequence(c, profile)),
        wrapper=int(wrapper),
        generic=generic,
        logged=int(c.kind == "log"),
        handled=int(handled),
        chained=int(c.chained),
        order=index,
    )


def root_cause(
    candidates: Iterable[Candidate],
    facts: Mapping[str, object],
    phase: str,
    profile: Profile,
    *,
    whole: bool = False,
) -> Error | None:
    """Choose the decisive error among `candidates` (log order) and merge its copies from other ranks; what
    the engine's tracebacks tell and its hints come from its `profile`."""
    items = list(candidates)
    if not items:
        return None
    cats = [
        c.category or categorize(_message(c), "\n".join(c.traceback), rules=profile.categories) for c in items
    ]
    # In a chain, the cause ("direct cause of the following") before the wrapper it caused, but an exception
    # raised while handling another ("During handling ...") before the one handled: the handled one (a
    # StopIteration, a KeyError looked up) is what the code expected, the later one ended the process.
    handled = _handled(items)
    reporters = _reporters(items)
    best_i = min(
        range(len(items)),
        key=lambda i: rank(items[i], cats[i], i, profile, handled=i in handled, reporter=i in reporters),
    )
    best = items[best_i]
    category = cats[best_i]
    if best.kind == "rule":
        # Copies of one message printed by many threads at once (CUDA device asserts): another thread's
        # characters land in the middle of a copy, and interleaving only ever adds characters, so the
        # shortest copy is the least garbled.
        copies = [
            c
            for c, cat in zip(items, cats, strict=True)
            if c.kind == "rule"
            and cat == category
            and (c.role, c.noise) == (best.role, best.noise)
            and (c is best or _common_prefix(c.summary, best.summary) >= _SAME_MESSAGE_PREFIX)
        ]
        best = min(copies, key=lambda c: len(c.summary))
    key = _MASK.sub("#", best.summary)
    twins = [c for c in items if c.traceback and _MASK.sub("#", c.summary) == key]
    if not best.traceback and twins:
        # the same error from another rank may have come with its traceback
        best = replace(best, traceback=twins[0].traceback, exception=twins[0].exception or best.exception)
    if best.kind == "rule" and best.phase_hint not in (None, "ready") and _served_after(best, items):
        # a line whose rule names the step it is printed in (SGLang's 'Piecewise CUDA Graph failed', printed
        # around the piecewise graph's capture and its replay), then a traceback of the same failure through the
        # server's serving loop: the replay, while serving
        best = replace(best, phase_hint="ready")
    if best.phase_hint is None:
        hints = [c.phase_hint for c in (*twins, *items) if c.phase_hint]
        # the other evidence's phase; a sign of serving (a frame of the server's request loop, a failed batch's
        # dump) outweighs an earlier phase's, which is then work done for a request (a decode inside that loop)
        best = replace(best, phase_hint="ready" if "ready" in hints else next(iter(hints), None))
    if (proven := phase_from_error(best.summary)) is not None:
        best = replace(best, phase_hint=proven)
    ranks = sorted(
        {c.source for c in items if c.source and _MASK.sub("#", c.summary) == key}, key=_rank_order
    )
    silent = category == Category.OTHER and all(
        c.noise or (c.role == "wrapper" and not _cut_short(c)) or _is_consequence(c, profile) for c in items
    )
    if silent and (whole or any(_is_consequence(c, profile) and c.role != "wrapper" for c in items)):
        # Nothing but wrappers pointing elsewhere ("See root cause above") in a log `whole` from the engine's
        # start marker, or beside the news that a part went away (a broken pipe to it, "cancelled"): the
        # process they point at died without a word of its own, as a SIGKILL leaves it. (In an excerpt the
        # cause may just be cut off.) A consequence that is itself a wrapper (vLLM's EngineDeadError "See stack
        # trace (above) for the root cause", a request's traceback cut after it) is no such news: in an excerpt
        # it points at a cause above the crop.
        category = Category.KILLED
    # a rule's hint may name facts: "{avail_mem_after_weights_gb} GB free"
    hint = (best.hint and fill(best.hint, facts)) or hint_for(
        category, best.summary, best.phase_hint or phase, facts, profile
    )
    if silent and category == Category.KILLED:
        hint = (
            "a process of the engine died without a word of its own, as a SIGKILL leaves it (often the kernel's "
            "OOM killer: check `dmesg -T` and host RAM); the errors shown are the others noticing"
        )
    elif best.role == "wrapper" and not best.hint and category != Category.KILLED:
        hint = f"{hint}; the decisive error was printed by another process and is not in this log"
    return Error(
        category=category,
        summary=_clean_summary(best.summary),
        exception=best.exception,
        hint=hint,
        ranks=tuple(ranks),
        line=best.line,
        traceback=best.traceback,
        phase_hint=best.phase_hint,
        step_phase=_step_phase(best, items, profile),
        elsewhere=best.role == "wrapper",
        consequence=_is_consequence(best, profile),
    )


def _served_after(line: Candidate, items: list[Candidate]) -> bool:
    # a traceback after the line whose frames are the server's serving loop: its own process's report of the
    # same failure (the process tag may not say so: a relay's tag on the rows, another process's record between
    # them leaving the rest untagged)
    return any(c.kind == "traceback" and c.opened >= line.line and c.phase_hint == "ready" for c in items)


def _cut_short(c: Candidate) -> bool:
    # a process's own traceback that the log ends in, before its exception: what failed was said and cut off,
    # so the process did not die without a word (a wrapper, but not one that points at another's report)
    return c.kind == "traceback" and c.exception is None and bool(c.traceback)


def _reporters(items: list[Candidate]) -> set[int]:
    # A logger's header over the traceback it logs: a wrapper rule's line that names no category of its own
    # (vLLM's logger.exception("AsyncLLM output_handler failed.") and "EngineCore encountered a fatal error.",
    # SGLang's logger.error(f"Scheduler hit an exception: {traceback}")), followed on its own line or the next by
    # a traceback of the same process that has its exception line. Header and traceback are one report, and the
    # traceback's exception is its decisive line, even one that is only the news of another part's death (the
    # EngineDeadError the output handler logs): the header stays the fatal line the verdict is timed by. Its
    # copies from other processes whose traceback the log lost are the same report.
    logged: set[str] = set()
    for c in items:
        if _header(c) and any(
            d.kind == "traceback"
            and d.source == c.source
            and d.exception is not None
            and 0 <= d.opened - c.line <= 1
            for d in items
        ):
            logged.add(_MASK.sub("#", c.summary))
    if not logged:
        return set()
    return {i for i, c in enumerate(items) if _header(c) and _MASK.sub("#", c.summary) in logged}


def _header(c: Candidate) -> bool:
    # a wrapper rule's line that says nothing of what failed: what it reports comes with it or elsewhere
    return c.kind == "rule" and c.role == "wrapper" and c.category is None and not c.noise


def _handled(items: list[Candidate]) -> set[int]:
    # the tracebacks that the next traceback of their stream was raised while handling; not one whose message
    # the next carries (a framework's wrapper around the accelerator runtime's own error, re-raised with its
    # text while handling it): the error it carries is the decisive one
    out: set[int] = set()
    last: dict[str, int] = {}
    for i, c in enumerate(items):
        if c.kind != "traceback":
            continue
        if c.handling and c.source in last and not _carries(c, items[last[c.source]]):
            out.add(last[c.source])
        last[c.source] = i
    return out


_MIN_CARRIED = 12  # characters of a message another must repeat to carry it (not a bare "Error")


def _carries(wrapper: Candidate, inner: Candidate) -> bool:
    # the wrapper's message repeats the inner exception's message ("Capture cuda graph failed: CUDA error: ...")
    m = EXCEPTION_LINE.match(inner.summary.strip())
    message = (m.group("msg") or "").strip() if m else ""
    return len(message) >= _MIN_CARRIED and message in wrapper.summary


def _step_phase(best: Candidate, items: list[Candidate], profile: Profile) -> str | None:
    # The startup step the error was raised out of; for an error without frames (a wrapper line saying a
    # worker died), the step another process's traceback of the same failure was in.
    for c in (best, *items):
        # a traceback the log cut before its exception line may have gone on into a later step below the
        # last frame shown (vLLM's _initialize_kv_caches -> initialize_from_config runs the warm-up too)
        if c.traceback and not c.noise and c.exception is not None:
            step = _innermost_step("\n".join(c.traceback), profile)
            if step:
                return phase_from_frames(step, profile)
    return None


def _clean_summary(summary: str) -> str:
    # a logging error's "Message: '...'" line is the message itself
    text = summary.strip()
    return text.removeprefix("Message: ").strip().strip("'\"") if text.startswith("Message: ") else text


def _rank_order(source: str) -> tuple[str, int]:
    m = re.search(r"(\d+)$", source)
    return (source[: m.start()] if m else source, int(m.group(1)) if m else -1)
