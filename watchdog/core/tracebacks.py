"""Traceback assembly: Python tracebacks put back together per rank or process from interleaved lines (pure).

Streams are keyed by the line's source tag (`TP3`, `rank0`); an untagged line continues the traceback opened
last (SGLang tags only the first line). "--- Logging error ---" blocks are noise, with all they contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from watchdog.core.envelope import Record

__all__ = ["EXCEPTION_ENDINGS", "EXCEPTION_LINE", "TRACEBACK_HEADER", "Assembler", "Traceback"]

TRACEBACK_HEADER = "Traceback (most recent call last)"
_CHAIN = ("The above exception was the direct cause", "During handling of the above exception")
# "RuntimeError: msg", "torch.OutOfMemoryError: msg", "triton.runtime.errors.OutOfResources: msg", "KeyError"
EXCEPTION_ENDINGS = (
    "Error",
    "Exception",
    "Exit",
    "Interrupt",
    "OutOfResources",
    "Failure",
    "Timeout",
    "StopIteration",
    "StopAsyncIteration",
)
EXCEPTION_LINE = re.compile(
    r"^(?P<exc>(?:[A-Za-z_]\w*\.)*(?=[A-Za-z_])\w*(?:" + "|".join(EXCEPTION_ENDINGS) + "))"
    r"(?::\s*(?P<msg>.*))?$"
)
_MAX_LINES = 400  # a traceback longer than this keeps its head and tail
_FRAME = ('File "', 'File \\"')  # a frame line; the second as pasted from JSON, its quotes escaped
# how far a frame line that opens a cut traceback may be indented: Python's two spaces (traceback.py
# FrameSummary/StackSummary.format_frame_summary: '  File "{}", line {}, in {}'), or one where a paste lost the
# first (a code block's first line, ' File "/opt/dynamo/venv/.../pydantic/_internal/_dataclasses.py", line 123, in
# __init__' in ai-dynamo/dynamo#4934, 2025-12); deeper ones are a program's own text, not a frame
_FRAME_INDENTS = (' File "', "  File")
_WRAPPED_NAME = re.compile(r"\w+")  # the rest of a frame's function name, wrapped onto its own line
# a frame whose head ('File "/path/to/') its reporter cut: 'sglang/multimodal_gen/utils.py", line 298, in f'
_CUT_FRAME = re.compile(r'^[\w.<>/\\-]+\.py", line \d+, in [\w<>.]+$')
# a frame line that a wrap cut inside its path ('  File "/usr/lib/python3.12/site-packages/vllm/entry'): its rest,
# a _CUT_FRAME ('points/openai/serving_chat.py", line 165, in f'), is on the next line
_OPEN_FRAME = re.compile(r'File \\?"[^"]*$')
_MAX_CONTINUATION = 20  # message lines after the exception line
_RESUME_WITHIN = 3  # lines after another process's record within which a traceback's frames may go on
_LOGGING_REPORT = ("Call stack:", "Message:", "Arguments:")  # the parts of the logging module's error report
# CPython's faulthandler dump (Python/traceback.c dump_traceback / _Py_DumpTracebackThreads): after 'Fatal Python
# error: Aborted' (or on faulthandler.dump_traceback), a header per thread, 'Current thread 0x00007f.. (most recent
# call first):' / 'Thread 0x00007f.. (most recent call first):' ('Stack (most recent call first):' with
# all_threads=False), then its frames worded '  File "<file>", line N in <function>' (no comma before 'in', unlike a
# traceback's). A thread dump, not an exception: no line of it is a traceback's exception line.
# CPython's default sys.unraisablehook (Python/errors.c PyErr_WriteUnraisable, 3.8+): 'Exception ignored in: <obj>'
# or, with the caller's own words, 'Exception ignored on calling ctypes callback function: <fn>' (ctypes, 3.11+ as
# 'Exception ignored while calling ctypes callback function' from 3.13), 'Exception ignored in atexit callback: ...',
# then the traceback: an exception that could not be raised to anyone (a callback from C, a __del__, a finalizer),
# printed and ignored; the program goes on (llama-cpp-python's sampler callback raising under a request).
_IGNORED = "Exception ignored "
_DUMP_HEADER = re.compile(r"^(?:(?:Current thread|Thread) 0x[0-9a-fA-F]+|Stack) \(most recent call first\):$")
_DUMP_FRAME = re.compile(r'^File "[^"]*", line \d+ in \S+$')
# `Assembler.feed` passes over a line that nothing open can take and that holds none of these words (in C, no
# strip nor regex): each of what opens something holds one (`_FRAME` and `_CUT_FRAME` a frame, `TRACEBACK_HEADER`,
# "--- Logging error ---", `_CHAIN`'s markers); False: every line takes the whole look (the tests' reference)
_QUICK_LOOK = True


@dataclass(slots=True)
class Traceback:
    """One assembled traceback (or a fragment of one, when the log starts in its middle)."""

    source: str
    line: int  # line number of its first line
    at: str | None
    seconds: float | None
    header: str = ""  # text before "Traceback" on the opening line, e.g. "Scheduler hit an exception:"
    lines: list[str] = field(default_factory=list)
    exc_index: int = -1  # index in `lines` of the exception line, -1 until seen
    exc_line_no: int = 0  # line number of the exception line
    noise: bool = False  # inside a "--- Logging error ---" block
    # right under CPython's unraisable-exception header (`_IGNORED`): printed and ignored, the program went on
    ignored: bool = False
    chained: bool = False  # raised while handling, or because of, the previous traceback of its stream
    handling: bool = False  # raised while handling it ("During handling ..."): this one ended the process
    body_style: tuple[str, bool] | None = None  # (level, has_time) of its body lines
    # the level of the record that holds its header, where that record has one: a traceback whose every line is
    # a record of its own (vLLM's worker prefix) says its level on its first line already
    header_level: str = ""
    continuation: int = 0
    dropped: int = 0
    after_frame: bool = False  # the last line was a frame ('File "...", line N, in f')
    reported_cut: bool = False  # reported as cut (the log went quiet inside it): its end must replace that

    @property
    def exception(self) -> str | None:
        """The exception line ("ValueError: ..."), None for a fragment without one."""
        return self.lines[self.exc_index] if self.exc_index >= 0 else None

    def last_statement(self) -> str | None:
        """The source line of the innermost frame, e.g. "assert expert_location_metadata is not None"."""
        end = self.exc_index if self.exc_index >= 0 else len(self.lines)
        for i in range(end - 1, -1, -1):
            if self.lines[i].lstrip().startswith('File "'):
                for code in self.lines[i + 1 : end]:
                    stripped = code.strip()
                    if stripped and not set(stripped) <= {"^", "~", " "}:
                        return stripped
                return None
        return None

    def add(self, text: str) -> None:
        if len(self.lines) >= _MAX_LINES:
            # So as not to grow without bound: keep the head, then the most recent lines.
            del self.lines[_MAX_LINES // 2]
            self.dropped += 1
        self.lines.append(text)


class Assembler:
    """Feeds records in log order; returns tracebacks as they complete."""

    def __init__(self) -> None:
        self._open: dict[str, Traceback] = {}
        self._last: str | None = None  # the stream that untagged lines continue
        self._chain_next: set[str] = set()  # streams whose next traceback is chained to the previous one
        self._handling_next: set[str] = set()  # ... and of those, the ones chained by "During handling"
        self._logging_error: set[str] = set()  # streams inside a "--- Logging error ---" block
        self._thread_dump: set[str] = set()  # streams inside a faulthandler dump (`_DUMP_HEADER`)
        # the line of CPython's unraisable-exception header ('Exception ignored in: ...'), by stream: the traceback
        # right after it was printed and ignored, the program went on (`_IGNORED`)
        self._ignored: dict[str, int] = {}
        # A traceback that a record of another process cut before its exception line, by stream, with the line of
        # that record: frames right after it are the same traceback going on (issue 30)
        self._interrupted: dict[str, tuple[Traceback, int]] = {}
        # The traceback whose exception line the last record was: a live follower reports it at once, not
        # when a later line closes it (a dying process may never print one).
        self.excepted: Traceback | None = None
        # Whether the last record was a frame's source line: code quoted from a file, not a message (vLLM 0.9's
        # 'raise RuntimeError("Engine core initialization failed. "' above the exception line that says it)
        self.code = False
        # Whether the last record was a line the exception's message goes on over (after its exception line)
        self.message = False

    @property
    def busy(self) -> bool:
        """True while a traceback or logging-error block is open: every line must then be fed."""
        return bool(self._open) or bool(self._logging_error)

    @property
    def chaining(self) -> bool:
        """True while a chain's next traceback is awaited: every line must be fed until one that is not blank (it
        opens the next traceback, or says there is none)."""
        return bool(self._chain_next)

    @property
    def busy_or_chaining(self) -> bool:
        """`busy or chaining`, in one look (the scanner asks it of every line)."""
        return bool(self._open or self._logging_error or self._chain_next)

    @property
    def awaiting_exception(self) -> bool:
        """True while a traceback (not logging noise) is open and its exception line has not come yet."""
        return any(tb.exc_index < 0 and not tb.noise for tb in self._open.values())

    def feed(self, rec: Record, line: int) -> tuple[bool, list[Traceback]]:
        """Take one record; return whether it belonged to a traceback, and the tracebacks it completed."""
        done: list[Traceback] = []
        self.excepted = None
        self.code = False
        self.message = False
        content = rec.content
        if (
            _QUICK_LOOK
            and not (self._open or self._logging_error or self._chain_next or self._thread_dump)
            and "File " not in content
            and TRACEBACK_HEADER not in content
            and 'py", line ' not in content
            and "Logging error" not in content
            and "above exception" not in content
            and _IGNORED not in content
        ):
            # nothing is open and the line holds none of what opens a traceback, a chain or a logging error
            # (`_QUICK_LOOK`): what the look below says of it, for most lines read whole (a startup's markers)
            return False, done
        key = rec.source or self._last or ""
        stripped = content.strip()
        if self._in_thread_dump(key, stripped):
            return True, done
        if _CUT_FRAME.match(stripped):
            tb = self._open.get(key)
            if tb is not None and tb.exc_index < 0 and tb.lines and _OPEN_FRAME.search(tb.lines[-1]):
                # the rest of a frame line wrapped inside its path (by a terminal, or a post's fixed width): it
                # completes that frame, whatever prefix its own line got (a transport stamps every line)
                tb.lines[-1] += stripped
                tb.after_frame = True
                self._last = key
                return True, done
            content = stripped = f'File "{stripped}'  # read as the frame it is (the source line follows it)
        if stripped.startswith(_IGNORED) and (key not in self._open or self._open[key].exc_index >= 0):
            self._close(key, done)  # the traceback before it ended at its exception line
            self._ignored[key] = line
            self._last = key
            return True, done
        if stripped == "--- Logging error ---":
            self._close(key, done)
            self._logging_error.add(key)
            self._last = key
            return True, done
        pos = content.find(TRACEBACK_HEADER)
        if pos >= 0:
            self._interrupted.pop(key, None)
            self._close(key, done)
            # Another stream starting a traceback means the complete ones have ended: ranks print whole.
            done.extend(self.flush(complete_only=True))
            opened = Traceback(rec.source or key, line, rec.at, rec.seconds, header=content[:pos].strip())
            opened.add(TRACEBACK_HEADER + ":")
            opened.header_level = rec.level
            opened.ignored = self._ignored.pop(key, -2) == line - 1
            opened.noise = key in self._logging_error or opened.ignored
            opened.chained = key in self._chain_next
            opened.handling = opened.chained and key in self._handling_next
            self._chain_next.discard(key)
            self._handling_next.discard(key)
            self._open[key] = opened
            self._last = key
            return True, done
        tb = self._open.get(key)
        if tb is None:
            if stripped.startswith(_FRAME) and (content[0] != " " or content.startswith(_FRAME_INDENTS)):
                fragment = Traceback(
                    rec.source or key, line, rec.at, rec.seconds, noise=key in self._logging_error
                )
                cut = self._interrupted.pop(key, None)
                if cut is not None and line <= cut[1] + _RESUME_WITHIN:
                    # the frames go on right after another process's record (its source line or carets may come
                    # first): the same traceback, whole again; it replaces the part reported cut (same first line)
                    before = cut[0]
                    fragment.line, fragment.header = before.line, before.header
                    fragment.lines = list(before.lines)
                    fragment.chained, fragment.handling = before.chained, before.handling
                fragment.body_style = _style(rec)
                fragment.add(content)
                fragment.after_frame = True
                self._open[key] = fragment
                self._last = key
                return True, done
            if stripped.startswith(_CHAIN):
                # Python prints a blank line, then the chain marker, then the next traceback
                self._chain(key, stripped)
                return True, done
            if key in self._logging_error:
                if stripped.startswith("Arguments:"):
                    self._logging_error.discard(key)
                return True, done
            if key in self._chain_next and stripped:
                self._chain_next.discard(key)
            return False, done
        style = _style(rec)
        if (
            tb.body_style is None
            and len(tb.lines) == 1
            and (rec.at is not None or rec.level)
            and tb.at is None
            and not tb.header_level
            and not rec.source
        ):
            # A log record (a time or a level) right after a bare header: Python writes the header and its frames
            # as one block, so another process's record came between them (its frames may follow it).
            self._interrupted[key] = (tb, line)
            self._finish(key, done)
            return False, done
        if (
            tb.body_style is None
            and len(tb.lines) == 1
            and tb.header_level
            and (rec.at is not None or rec.level)
            and not rec.source
            and style != (tb.header_level, tb.at is not None)
        ):
            # The same after a header that is a record of its own (vLLM's process prefix on every line): its body
            # lines are records of that level and time; one of another level or time and without the header's
            # source is another process's record that came between them (its frames may follow it).
            self._interrupted[key] = (tb, line)
            self._finish(key, done)
            return False, done
        if tb.body_style is None and len(tb.lines) == 1:
            tb.body_style = style
        if tb.exc_index < 0:
            if (
                tb.body_style is not None
                and style != tb.body_style
                and (rec.at is not None or rec.level)
                and not rec.source
            ):
                # A new log record (a time or a level the body lines lack), not a traceback line: the traceback
                # was cut off in the log, or another process's record came between its lines.
                self._interrupted[key] = (tb, line)
                self._finish(key, done)
                return False, done
            if not stripped or content[0] in " \t" or stripped.startswith(("|", "+-", "^", "~")):
                tb.add(content)
                self.code = tb.after_frame and bool(stripped) and not stripped.startswith((*_FRAME, "^", "~"))
                tb.after_frame = stripped.startswith(_FRAME)
                return True, done
            if stripped.startswith(_FRAME):
                # a frame whose indentation was lost (a traceback pasted flush left)
                tb.add("  " + stripped)
                tb.after_frame = True
                return True, done
            if (
                tb.after_frame
                and _WRAPPED_NAME.fullmatch(stripped)
                and not EXCEPTION_LINE.match(stripped)
                and not tb.lines[-1].rstrip().endswith(">")
            ):
                # a terminal wrapped the frame line in its function's name: "in _initialize_k" / "v_caches";
                # or at the blank before it, which the wrap took: "..., line 409, in" / "run_asgi" (TabbyAPI)
                tb.lines[-1] += (" " if tb.lines[-1].endswith(", in") else "") + stripped
                return True, done
            if tb.after_frame and not EXCEPTION_LINE.match(stripped):
                # the frame's source line, its indentation lost
                tb.add("    " + stripped)
                tb.after_frame = False
                self.code = True
                return True, done
            if stripped.startswith(_LOGGING_REPORT):
                # the logging module's report of a failed log call: its call stack has no exception line
                self._end_report(key, stripped, done)
                return True, done
            tb.exc_index = len(tb.lines)
            tb.exc_line_no = line
            tb.add(stripped)
            self.excepted = tb
            return True, done
        # after the exception line
        if not stripped:
            self._finish(key, done)
            return True, done
        if stripped.startswith(_CHAIN):
            self._finish(key, done)
            self._chain(key, stripped)
            return True, done
        if stripped.startswith(_LOGGING_REPORT):
            self._end_report(key, stripped, done)
            return True, done
        if style != tb.body_style or tb.continuation >= _MAX_CONTINUATION:
            self._finish(key, done)
            return False, done
        tb.continuation += 1
        tb.add(content)
        self.message = True
        return True, done

    def open(self) -> list[Traceback]:
        """The tracebacks still open, left open."""
        return list(self._open.values())

    def flush(self, *, complete_only: bool = False) -> list[Traceback]:
        """Return the tracebacks still open (with `complete_only`, those whose exception line was seen)."""
        done: list[Traceback] = []
        last = self._last
        for key in list(self._open):
            if not complete_only or self._open[key].exc_index >= 0:
                self._finish(key, done)
        if not complete_only:
            # untagged lines that come after all (a writer that paused) still belong to the same stream
            self._last = last
        return done

    def _in_thread_dump(self, key: str, stripped: str) -> bool:
        """Whether this line is part of a faulthandler dump (`_DUMP_HEADER`), which it then takes: a header, a frame
        worded as faulthandler words them, or a blank line between its threads. A frame so worded opens the dump
        (its thread's header before it is passed over as a line of no traceback, as any line nothing takes); a log
        that starts inside the dump is read the same. A traceback open on the stream reads its own lines."""
        if key in self._open:
            return False
        # a header opens nothing by itself (it holds none of `_QUICK_LOOK`'s words): the frames under it do
        if _DUMP_FRAME.match(stripped) or (key in self._thread_dump and _DUMP_HEADER.match(stripped)):
            self._thread_dump.add(key)
            self._last = key
            return True
        if key in self._thread_dump:
            if not stripped:
                return True
            self._thread_dump.discard(key)  # the dump ended: this line is read as any other
        return False

    def _chain(self, key: str, marker: str) -> None:
        self._chain_next.add(key)
        if marker.startswith(_CHAIN[1]):
            self._handling_next.add(key)
        else:
            self._handling_next.discard(key)

    def _end_report(self, key: str, stripped: str, done: list[Traceback]) -> None:
        # a part of the logging module's report ends the traceback; its last part ends the logging error
        self._finish(key, done)
        if stripped.startswith("Arguments:"):
            self._logging_error.discard(key)

    def _close(self, key: str, done: list[Traceback]) -> None:
        if key in self._open:
            self._finish(key, done)

    def _finish(self, key: str, done: list[Traceback]) -> None:
        tb = self._open.pop(key)
        if self._last == key:
            self._last = next(reversed(self._open), None) if self._open else None
        done.append(tb)


def _style(rec: Record) -> tuple[str, bool]:
    return rec.level, rec.at is not None
