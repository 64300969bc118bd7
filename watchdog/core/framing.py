"""Framing: raw log bytes -> complete lines with their byte offsets (pure, no I/O).

Two layers, so the hot path stays in C:

* `Framer` cuts a byte stream into *blocks* of complete lines. It keeps an unfinished last line until its
  newline arrives, and cuts a line longer than `max_line` without buffering the rest of it.
* `clean()` and `iter_lines()` turn one raw line into text: tqdm ``\\r`` redraws become separate updates,
  ANSI escapes are stripped (also when a log shows them as literal ``^[[0;36m``, ``#033[2m`` or ``ESC[1;36m`` text),
  invalid UTF-8 is replaced and the other control characters dropped (NUL, BEL, backspace, the C1 controls
  U+0080-U+009F such as a terminal's one-character CSI; tab is kept): a log's text that reaches a chat, a
  terminal or a page moves no cursor and rings no bell (`without_controls` does the same for other text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_LINE",
    "Block",
    "Framer",
    "Line",
    "clean",
    "iter_lines",
    "split_line",
    "without_controls",
]

DEFAULT_MAX_LINE = 64 * 1024
# C0 controls but tab (newline and CR never reach a line), DEL, and the C1 controls (U+0080-U+009F; in UTF-8
# the bytes C2 80 to C2 9F): BEL, backspace, a lone ESC, the one-character CSI U+009B
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROLS_KEEP_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# one character class (the regex engine's fast path; an alternation was 5x slower): a C0 control, DEL, or the
# lead byte of U+0080-U+00BF (a C1 control, or a Latin-1 sign such as the degree: then the text is looked at)
_CONTROL_BYTES = re.compile(b"[\x00-\x08\x0a-\x1f\x7f\xc2]")

# ESC itself, or the three ways logs show an ESC that lost its byte: caret notation, syslog's octal, and the word
# "ESC" that `less` (without -R) and some web log viewers print in its place ("ESC[1;36m(APIServer pid=1)ESC[0;0m")
_ESC = r"(?:\x1b|\^\[|#033|(?<![A-Za-z])ESC(?=\[))"
_ANSI = re.compile(
    _ESC + r"(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
    # Ray and docker logs that lost the ESC byte entirely keep the SGR tail, e.g. "[36m(RayWorkerWrapper".
    r"|\[\d{1,3}(?:;\d{1,3})*m"
    # a NUL shown in caret notation, as `cat -v` and some web log viewers print it
    r"|\^@"
)
# _ANSI's one kind that begins with no ESC of _ESC's three: looked for alone, from its "[" on (most lines of a
# log hold a "[", few an SGR tail)
_SGR_TAIL = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")


@dataclass(frozen=True, slots=True)
class Block:
    """A run of complete raw lines, each ending in a newline, that starts at `offset` in the stream."""

    offset: int  # byte offset of data[0] in the stream
    data: bytes  # complete lines; a cut over-long line ends with an added newline (see `partial`)
    partial: bool = False  # its newline was added: an over-long line's kept head, or a last line at EOF
    # each line's offset in the stream when the lines are decoded records (formats.Unwrapper), not its bytes;
    # empty: a line's offset is `offset` plus where it starts in `data`
    starts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Line:
    """One line of log text, or one tqdm redraw within a line."""

    offset: int  # byte offset of the line's (or redraw's) first byte in the stream
    text: str  # cleaned text, no newline


class Framer:
    """Cuts a byte stream into blocks of complete lines; see the module docstring."""

    __slots__ = ("_buf", "_buf_offset", "_skipping", "max_line")

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE, offset: int = 0) -> None:
        self.max_line = max_line
        self._buf = b""
        self._buf_offset = offset  # stream offset of _buf[0]
        self._skipping = False  # inside the dropped tail of a cut line, until its newline

    @property
    def offset(self) -> int:
        """Stream offset just past the last byte fed."""
        return self._buf_offset + len(self._buf)

    @property
    def pending(self) -> int:
        """Bytes held back as an unfinished last line."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Block]:
        """Take the next bytes of the stream and return the blocks of lines they complete."""
        blocks: list[Block] = []
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._buf_offset += len(data)
                return blocks
            self._skipping = False
            self._buf_offset += nl + 1
            data = data[nl + 1 :]
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n") + 1
        if end:
            head, buf = buf[:end], buf[end:]
            self._emit(head, blocks)
        self._buf = buf
        if len(buf) > self.max_line:
            # So as not to hold an endless line in memory: keep its head, drop the rest up to its newline.
            blocks.append(Block(self._buf_offset, buf[: self.max_line] + b"\n", partial=True))
            self._buf_offset += len(buf)
            self._buf = b""
            self._skipping = True
        return blocks

    def take_line(self, data: bytes) -> bool:
        """`feed` of `data` when it is one whole line (a live log's read of one line) that `feed` would return as
        the one block of a block of its own, unchanged (nothing held before it, not cut): True, and the caller
        reads `data` as that block, with no list nor `Block` made. False: nothing was done; `feed` it."""
        if self._buf or self._skipping or not data or len(data) - 1 > self.max_line:
            return False
        if data.find(b"\n") != len(data) - 1:
            return False
        self._buf_offset += len(data)
        return True

    def flush(self) -> list[Block]:
        """End of stream: return the unfinished last line, if any, as a line of its own."""
        if not self._buf:
            return []
        block = Block(self._buf_offset, self._buf + b"\n", partial=True)
        self._buf_offset += len(self._buf)
        self._buf = b""
        return [block]

    def _emit(self, head: bytes, blocks: list[Block]) -> None:
        # Long lines inside a complete run are cut the same way as streaming ones, so chunking never matters.
        if len(head) > self.max_line + 1 and _has_long_line(head, self.max_line):
            pos = 0
            while pos < len(head):
                nl = head.index(b"\n", pos)
                if nl - pos > self.max_line:
                    blocks.append(
                        Block(self._buf_offset + pos, head[pos : pos + self.max_line] + b"\n", partial=True)
                    )
                else:
                    blocks.append(Block(self._buf_offset + pos, head[pos : nl + 1]))
                pos = nl + 1
            _merge_plain(blocks)
        else:
            blocks.append(Block(self._buf_offset, head))
        self._buf_offset += len(head)


def _has_long_line(head: bytes, bound: int) -> bool:
    # Jump from the last newline of each window to the next: a few C-level searches per megabyte.
    pos = 0
    end = len(head)
    while pos < end:
        nl = head.rfind(b"\n", pos, pos + bound + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False


def _merge_plain(blocks: list[Block]) -> None:
    merged: list[Block] = []
    for block in blocks:
        last = merged[-1] if merged else None
        if last and not last.partial and not block.partial and last.offset + len(last.data) == block.offset:
            merged[-1] = Block(last.offset, last.data + block.data)
        else:
            merged.append(block)
    blocks[:] = merged


def clean(raw: bytes) -> str:
    """Decode one raw segment (no CR, no newline): replace bad UTF-8, strip ANSI escapes and control
    characters (tab kept)."""
    text = raw.decode("utf-8", "replace")
    if text.isprintable():
        # nearly every line: no control character (no ESC, nor any character `_CONTROLS` removes), one C pass to
        # know it; only the kinds of `_ANSI` that lost their ESC byte may be there
        if (
            "#033" in text
            or "^[" in text
            or "^@" in text
            or "ESC[" in text
            or _SGR_TAIL.search(text) is not None
        ):
            return _ANSI.sub("", text)
        return text
    if (
        "\x1b" in text
        or "^[" in text
        or "#033" in text
        or "^@" in text
        or "ESC[" in text
        or _SGR_TAIL.search(text) is not None
    ):
        text = _ANSI.sub("", text)
    if _CONTROL_BYTES.search(raw) is not None:  # rare: looked for in the bytes, in C, before any text work
        text = _CONTROLS.sub("", text)
    return text


def clean_keeps(template: bytes) -> bool:
    """Whether `clean` leaves every line of the template `template` (a line's bytes, each ASCII digit made `0`, no
    newline) as its bytes decoded: it is ASCII and `clean` takes its first return on it. What `clean` looks for
    tells no digit from another (a control byte, ESC's stand-ins, an SGR tail's digit classes), but for syslog's
    "#033", whose template is "#000": a template that holds it is not vouched for."""
    if not template.isascii() or b"#000" in template:
        return False
    text = template.decode("ascii")
    return (
        text.isprintable()
        and "^[" not in text
        and "^@" not in text
        and "ESC[" not in text
        and _SGR_TAIL.search(text) is None
    )


def without_controls(text: str) -> str:
    """`text` without its ANSI escapes and control characters (tab and newline kept): for text that did not
    come through `clean` (an error a remote host printed, a request's path) on its way to a person."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROLS_KEEP_NEWLINE.sub("", text)


def iter_lines(block: Block) -> Iterator[Line]:
    """Yield the cleaned lines of a block; a line with tqdm ``\\r`` redraws yields one Line per redraw."""
    offset = block.offset
    raws = block.data.split(b"\n")[:-1]  # every line of a block ends with a newline
    if block.starts:
        for start, raw in zip(block.starts, raws, strict=True):
            yield from split_line(start, raw)
        return
    for raw in raws:
        yield from split_line(offset, raw)
        offset += len(raw) + 1


def split_line(offset: int, raw: bytes) -> Iterator[Line]:
    """Yield the redraws of one raw line (without its newline) as cleaned Lines; empty redraws are skipped."""
    if (
        13 not in raw
    ):  # no CR (a byte's value `in` bytes: a memchr; `b"\r" in raw` raises and clears a TypeError)
        yield Line(offset, clean(raw))
        return
    start = 0
    for part in raw.split(b"\r"):
        if part.strip():
            yield Line(offset + start, clean(part))
        start += len(part) + 1
