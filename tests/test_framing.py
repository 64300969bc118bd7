"""Tests for watchdog.core.framing: bytes -> blocks of complete lines -> cleaned Lines with exact offsets."""

from __future__ import annotations

import codecs
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.analyzer import Analyzer
from watchdog.core.encoding import Transcoder
from watchdog.core.framing import Block, Framer, Line, clean, iter_lines, split_line
from watchdog.profiles.loader import load_engine
from watchdog.vocabulary import State


def _lines(blocks: list[Block]) -> list[tuple[int, str]]:
    return [(ln.offset, ln.text) for b in blocks for ln in iter_lines(b)]


def _feed_all(chunks: list[bytes], max_line: int, offset: int = 0) -> list[tuple[int, str]]:
    framer = Framer(max_line=max_line, offset=offset)
    blocks: list[Block] = []
    for chunk in chunks:
        blocks.extend(framer.feed(chunk))
    blocks.extend(framer.flush())
    return _lines(blocks)


def test_unfinished_line_waits_for_its_newline() -> None:
    """An unfinished last line is held back until its newline arrives, then emitted with its offset."""
    framer = Framer()
    assert _lines(framer.feed(b"one\ntw")) == [(0, "one")]
    assert framer.pending == 2
    assert framer.feed(b"o") == []
    assert _lines(framer.feed(b"\nthree\n")) == [(4, "two"), (8, "three")]
    assert framer.pending == 0
    assert framer.offset == 14


def test_flush_emits_last_line_at_eof() -> None:
    """flush() returns the unfinished last line as a partial block, and nothing once empty."""
    framer = Framer(offset=100)
    assert _lines(framer.feed(b"a\nlast")) == [(100, "a")]
    blocks = framer.flush()
    assert blocks == [Block(102, b"last\n", partial=True)]
    assert _lines(blocks) == [(102, "last")]
    assert framer.flush() == []
    assert framer.offset == 106


def test_tqdm_redraws_become_separate_lines() -> None:
    """Each "\\r" redraw of a tqdm bar is its own Line at the offset of its first byte."""
    raw = b"Loading: 10%\rLoading: 50%\rLoading: 100%\n"
    assert _feed_all([raw], max_line=1024, offset=7) == [
        (7, "Loading: 10%"),
        (20, "Loading: 50%"),
        (33, "Loading: 100%"),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b"\rA\r\rB\r", [Line(11, "A"), Line(14, "B")], id="empty-redraws-skipped"),
        pytest.param(b"A\r  \rB", [Line(10, "A"), Line(15, "B")], id="blank-redraw-skipped"),
        pytest.param(b"", [Line(10, "")], id="empty-line-kept"),
        pytest.param(b"plain", [Line(10, "plain")], id="no-cr"),
    ],
)
def test_split_line(raw: bytes, expected: list[Line]) -> None:
    """split_line yields one Line per non-blank redraw with offsets relative to the line start."""
    assert list(split_line(10, raw)) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b"\x1b[0;36mINFO\x1b[0m ok", "INFO ok", id="esc-sgr"),
        pytest.param(b"^[[0;36mINFO^[[0m ok", "INFO ok", id="caret-notation"),
        pytest.param(b"#033[2mdim#033[0m text", "dim text", id="syslog-octal"),
        pytest.param(b"[36m(RayWorkerWrapper pid=1)[0m hi", "(RayWorkerWrapper pid=1) hi", id="bare-sgr"),
        pytest.param(b"\x1b]0;title\x07body", "body", id="osc-title"),
        pytest.param(b"a\xffb\xc3", "a\ufffdb\ufffd", id="invalid-utf8"),
        pytest.param(b"a\x00b\x00", "ab", id="nul-dropped"),
        pytest.param(b"caret^@nul", "caretnul", id="caret-nul"),
        pytest.param(
            "caf\u00e9 [2025-07-02 07:31:02 TP0]".encode(),
            "caf\u00e9 [2025-07-02 07:31:02 TP0]",
            id="plain-kept",
        ),
    ],
)
def test_clean(raw: bytes, expected: str) -> None:
    """clean() strips ANSI escapes in all their logged forms, replaces bad UTF-8 and drops NULs."""
    assert clean(raw) == expected


def test_control_characters_are_dropped_and_offsets_stay_exact() -> None:
    """BEL, backspace, VT, FF, DEL and the C1 controls (a one-character CSI U+009B, NEL U+0085) never reach a
    line's text, tab is kept, and each line's offset is still its first byte in the stream, however chunked."""
    data = (
        b"RuntimeError: boom\x07\x07 rm -rf\x08\x08safe\n"
        + "\u009b2J cleared\u0085 next\x0b\x0c\x7f\tend\n".encode()
        + b"plain\n"
    )
    second = data.index(b"\xc2\x9b")
    expected = [
        (0, "RuntimeError: boom rm -rfsafe"),
        (second, "2J cleared next\tend"),
        (data.index(b"plain"), "plain"),
    ]
    assert _feed_all([data], max_line=1024) == expected
    assert _feed_all([data[i : i + 3] for i in range(0, len(data), 3)], max_line=1024) == expected


def test_long_line_is_cut_and_next_line_keeps_offset() -> None:
    """A line over max_line keeps its first max_line bytes, drops the rest, and the next line's offset is exact."""
    data = b"ab\n" + b"x" * 40 + b"\nnext\n"
    expected = [(0, "ab"), (3, "x" * 16), (44, "next")]
    assert _feed_all([data], max_line=16) == expected
    assert _feed_all([data[i : i + 5] for i in range(0, len(data), 5)], max_line=16) == expected


def test_long_line_cut_block_is_partial() -> None:
    """The kept head of a cut line is a partial block of exactly max_line bytes plus the added newline."""
    framer = Framer(max_line=8)
    blocks = framer.feed(b"0123456789abcdef")
    assert blocks == [Block(0, b"01234567\n", partial=True)]
    assert framer.feed(b"ghij") == []
    assert _lines(framer.feed(b"kl\nok\n")) == [(23, "ok")]


def test_huge_line_is_never_buffered() -> None:
    """Streaming 10 MB without a newline in 64 KiB chunks never holds more than max_line bytes."""
    max_line = 64 * 1024
    framer = Framer(max_line=max_line)
    chunk = b"y" * (64 * 1024)
    blocks: list[Block] = []
    total = 0
    while total < 10 * 1024 * 1024:
        blocks.extend(framer.feed(chunk))
        total += len(chunk)
        assert framer.pending <= max_line
    blocks.extend(framer.feed(b"tail\nafter\n"))
    blocks.extend(framer.flush())
    lines = _lines(blocks)
    assert [(off, len(text)) for off, text in lines] == [(0, max_line), (total + 5, 5)]
    assert lines[-1] == (total + 5, "after")


_TEXT = st.lists(
    st.sampled_from(
        ["a", "bc", " ", "\n", "\r", "\x1b[0;36m", "^[[1m", "#033[2m", "\x00", "é", "\xff", "[36m"]
    ),
    max_size=60,
).map(lambda parts: "".join(parts).encode("utf-8", "surrogateescape"))


@st.composite
def _split(draw: st.DrawFn, data_strategy: st.SearchStrategy[bytes]) -> tuple[bytes, list[bytes]]:
    data = draw(data_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return data, chunks


@settings(max_examples=300)
@given(case=_split(st.binary(max_size=200) | _TEXT), max_line=st.sampled_from([16, 1024]))
def test_rechunking_yields_same_lines(case: tuple[bytes, list[bytes]], max_line: int) -> None:
    """Any split of the same bytes into chunks yields the same (offset, text) lines as feeding them whole."""
    data, chunks = case
    assert _feed_all(chunks, max_line) == _feed_all([data], max_line)


@settings(max_examples=200)
@given(case=_split(st.binary(max_size=300) | _TEXT))
def test_cut_lines_bounded_and_pending_bounded(case: tuple[bytes, list[bytes]]) -> None:
    """With max_line=16 no emitted line exceeds 16 bytes of input and the framer never holds more."""
    _, chunks = case
    framer = Framer(max_line=16)
    for chunk in chunks:
        for block in framer.feed(chunk):
            for raw in block.data.split(b"\n")[:-1]:
                assert len(raw) <= 16
        assert framer.pending <= 16


_CRASH = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nRuntimeError: boom \u00e9\n'


@pytest.mark.parametrize(
    "encoded",
    [
        pytest.param(
            codecs.BOM_UTF16_LE + _CRASH.replace("\n", "\r\n").encode("utf-16-le"),
            id="powershell-utf16le-bom",
        ),
        pytest.param(codecs.BOM_UTF16_BE + _CRASH.encode("utf-16-be"), id="utf16be-bom"),
        pytest.param(_CRASH.encode("utf-16-le"), id="utf16le-no-bom"),
        pytest.param(codecs.BOM_UTF8 + _CRASH.encode(), id="utf8-bom"),
        pytest.param(_CRASH.replace("\n", "\r\n").encode(), id="crlf"),
    ],
)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_every_encoding_a_redirect_writes_gives_the_same_verdict(encoded: bytes, size: int) -> None:
    """A log written as UTF-16 (with or without a BOM), with a UTF-8 BOM or with CRLF line ends gives the
    verdict of its UTF-8 text, however the bytes are chunked."""
    analyzer = Analyzer(load_engine(None))
    for i in range(0, len(encoded), size):
        analyzer.feed(encoded[i : i + size], now=0.0)
    analyzer.finish(now=0.0)
    error = analyzer.lifecycle.current.error
    assert analyzer.state == State.CRASHED
    assert error is not None
    assert error.summary == "RuntimeError: boom \u00e9"


def test_plain_utf8_passes_through_the_transcoder_untouched() -> None:
    """UTF-8 without a BOM is not decoded at all: the bytes come out as they went in."""
    t = Transcoder()
    out = t.feed(b"ab") + t.feed(b"cd\xff\n") + t.feed(b"more\n") + t.flush()
    assert out == b"abcd\xff\nmore\n"
    assert t.encoding == "utf-8"


def test_a_decoded_blocks_lines_keep_their_records_offsets() -> None:
    """A block of lines decoded from records (formats.Unwrapper) gives each line the offset of its first record,
    however far its bytes are from the block's start; a redraw is counted from its line's offset."""
    block = Block(100, b"joined line\nA\rB\n", starts=(400, 250))
    assert list(iter_lines(block)) == [Line(400, "joined line"), Line(250, "A"), Line(252, "B")]


def test_take_line_takes_one_whole_line_and_nothing_else() -> None:
    """`take_line` takes a chunk that is one whole line, nothing held before it, not cut; it leaves any other."""
    framer = Framer(max_line=16)
    assert framer.take_line(b"abc\n")
    assert framer.offset == 4
    for chunk in (b"", b"abc", b"a\nb\n", b"\n\n", b"x" * 17 + b"\n"):
        assert not framer.take_line(chunk)
    assert framer.offset == 4
    framer.feed(b"ab")
    assert not framer.take_line(b"c\n")  # a line begun before it: feed joins them
    assert framer.feed(b"c\n") == [Block(4, b"abc\n")]


@settings(max_examples=300)
@given(case=_split(st.binary(max_size=200) | _TEXT), max_line=st.sampled_from([16, 1024]))
def test_a_line_taken_is_the_block_feed_gives(case: tuple[bytes, list[bytes]], max_line: int) -> None:
    """Where `take_line` takes a chunk, `feed` would have given that chunk as one block at the same offset, and
    the framer goes on as `feed` leaves it; the chunks cut at every newline too."""
    data, chunks = case
    for pieces in (chunks, re.findall(b"[^\n]*\n|[^\n]+", data)):
        fed, taken = Framer(max_line=max_line), Framer(max_line=max_line)
        for chunk in pieces:
            offset = taken.offset
            blocks = fed.feed(chunk)
            if taken.take_line(chunk):
                assert blocks == [Block(offset, chunk)]
            else:
                assert taken.feed(chunk) == blocks
            assert (taken.offset, taken.pending) == (fed.offset, fed.pending)


def _clean_by_every_look(raw: bytes) -> str:
    # `clean` as it was before its printable shortcut: each kind of escape and control looked for in turn
    from watchdog.core.framing import _ANSI, _CONTROLS  # noqa: PLC0415 - the reference's own parts

    text = raw.decode("utf-8", "replace")
    if (
        "\x1b" in text
        or "^[" in text
        or "#033" in text
        or "^@" in text
        or re.search(r"\[\d{1,3}(?:;\d{1,3})*m", text)
    ):
        text = _ANSI.sub("", text)
    return _CONTROLS.sub("", text)


_CLEAN_PIECES = [
    "\x1b",
    "[",
    "31",
    ";",
    "m",
    "^[",
    "^@",
    "#033",
    "\t",
    "\x00",
    "\x7f",
    "\u0085",
    "\u009b",
    "°",
    "\u00a0",
    "\ufeff",
    "é",
    "x",
    " ",
    "١",
    "]",
    "\x07",
    "\\",
]


@settings(max_examples=400)
@given(
    st.one_of(
        st.binary(max_size=40),
        st.lists(st.sampled_from(_CLEAN_PIECES), max_size=12).map(lambda p: "".join(p).encode()),
    )
)
def test_a_printable_line_is_cleaned_as_every_look_cleans_it(raw: bytes) -> None:
    """`clean` takes a line with no control character by one look for the escapes that lost their ESC: the same
    text as looking for each kind of escape and control in turn, whatever the bytes."""
    assert clean(raw.replace(b"\n", b"").replace(b"\r", b"")) == _clean_by_every_look(
        raw.replace(b"\n", b"").replace(b"\r", b"")
    )
