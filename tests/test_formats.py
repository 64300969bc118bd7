"""Tests for watchdog.core.formats: CRI, Docker json-file and journald JSON records read as the lines they hold,
on real captured samples (tests/fixtures/formats/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.analyzer import Analyzer
from watchdog.core.formats import Unwrapper, sniff
from watchdog.core.framing import Block, Framer, iter_lines
from watchdog.core.resume import restore, to_record
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import load_engine

FORMATS = Path(__file__).parent / "fixtures" / "formats"
EXAMPLE = Path(__file__).parent.parent / "examples" / "sglang-ep8-oom.log"
# the special lines as the program wrote them (the README's), without the ANSI colours `clean` strips
LONG = "x" * 16383 + "é" + "y" * 20000 + " Loading safetensors checkpoint shards: 100% Completed | 64/64"
ERROR = '(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] ValueError: "quoted" back\\slash\ttab ünïcödé 中文 ✓'


def _unwrap(data: bytes, chunk: int | None = None, max_line: int = 64 * 1024) -> list[tuple[int, str]]:
    framer, unwrapper = Framer(max_line=max_line), Unwrapper(max_line=max_line)
    blocks: list[Block] = []
    step = chunk or len(data) or 1
    for at in range(0, len(data), step):
        blocks += unwrapper.feed(framer.feed(data[at : at + step]))
    blocks += unwrapper.feed(framer.flush()) + unwrapper.flush()
    return [(line.offset, line.text) for block in blocks for line in iter_lines(block)]


def _texts(lines: list[tuple[int, str]]) -> list[str]:
    return [text for _, text in lines]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        pytest.param("cri-oom.log", "cri", id="cri"),
        pytest.param("docker-json-file-oom.log", "docker", id="docker-json-file"),
        pytest.param("journald-json-oom.log", "journald", id="journald-json"),
        pytest.param("journald-short-iso-oom.log", "plain", id="short-iso-per-line-prefix"),
        pytest.param("docker-logs-timestamps-oom.log", "plain", id="docker-timestamps-per-line-prefix"),
    ],
)
def test_a_logs_format_is_told_by_its_first_record(name: str, fmt: str) -> None:
    """The first record of a real sample names its format; per-line prefixes are no record format (the envelope
    peels them)."""
    first = (FORMATS / name).read_bytes().split(b"\n")[0]
    assert sniff(first) == fmt


def test_cri_partial_records_are_one_line_at_the_offset_of_the_first() -> None:
    """The real-format CRI sample's 36 KB line, cut into P records inside the two bytes of an "é", is read as the
    one line the program wrote, at the offset of its first record, after its time; the other records pass whole."""
    data = (FORMATS / "cri-special.log").read_bytes()
    lines = _unwrap(data)
    first_p = data.index(b" stderr P ") - len("2026-12-04T17:34:01.265552273Z")
    assert len(lines) == 6  # the line of "\r" redraws is three
    assert lines[4] == (first_p, f"2026-12-04T17:34:01.265552273Z stderr P {LONG}")
    assert lines[5] == (
        data.index(b"2026-12-04T17:34:01.311383251Z"),
        "2026-12-04T17:34:01.311383251Z stderr F last words without a newline",
    )
    assert lines[0][1].endswith("stderr F " + ERROR)


def test_docker_json_file_records_are_decoded_and_joined() -> None:
    """The real json-file sample's records are decoded (the \\u001b and \\u0009 escapes, the quotes, the backslash,
    the non-ASCII text), its 16 KB records joined into one line (Docker wrote the cut "é" as two U+FFFD), its last
    record without a newline read at the end, each line after its record's time."""
    data = (FORMATS / "docker-json-file-special.log").read_bytes()
    lines = _unwrap(data)
    assert _texts(lines)[0] == f"2026-12-04T17:34:01.265490431Z {ERROR}"
    # "\r" redraws: the time is the first's, as with `docker logs --timestamps`
    assert _texts(lines)[1:4] == [
        "2026-12-04T17:34:01.265535718Z Loading: 10%",
        "Loading: 50%",
        "Loading: 100%",
    ]
    assert lines[4] == (
        data.index(b'{"log":"xxxx'),
        "2026-12-04T17:34:01.265552273Z " + LONG.replace("é", "\ufffd\ufffd"),
    )
    assert lines[5] == (
        data.rindex(b'{"log":"last'),
        "2026-12-04T17:34:01.311383251Z last words without a newline",
    )


def test_journald_json_entries_are_decoded_and_joined() -> None:
    """The real journald sample's MESSAGE byte arrays (ANSI colours, invalid UTF-8, "\\r" redraws) are read as their
    bytes, its two entries of a line over 48 KB (_LINE_BREAK=line-max) as one line, each after its entry's time
    (__REALTIME_TIMESTAMP, microseconds, UTC)."""
    lines = _texts(_unwrap((FORMATS / "journald-json-special.log").read_bytes()))
    assert lines == [
        f"2026-12-04T17:34:09.679516Z {ERROR}",
        "2026-12-04T17:34:09.679516Z invalid utf-8 \ufffd\ufffd here: RuntimeError: CUDA out of memory",
        "2026-12-04T17:34:09.679516Z Loading: 10%",
        "Loading: 50%",
        "Loading: 100%",
        "2026-12-04T17:34:09.679953Z " + "z" * 50000 + " end of long line",
        "2026-12-04T17:34:09.685942Z last words without a newline",
    ]


@pytest.mark.parametrize(
    "name",
    ["cri-special.log", "docker-json-file-special.log", "journald-json-special.log", "cri-oom.log"],
)
@settings(max_examples=25, deadline=None)
@given(chunk=st.integers(min_value=1, max_value=20000))
def test_rechunking_the_records_yields_the_same_lines(name: str, chunk: int) -> None:
    """However a real sample's bytes arrive, the same lines come out at the same offsets."""
    data = (FORMATS / name).read_bytes()
    assert _unwrap(data, chunk) == _unwrap(data)


def test_partial_records_of_two_streams_are_joined_apart() -> None:
    """A stdout line in P records with a whole stderr record between them: the stderr line comes out first, the
    stdout line whole once its F record comes, at its first record's offset."""
    records = [
        b"2026-12-04T08:54:17.1Z stdout P Loading safetensors ",
        b"2026-12-04T08:54:17.2Z stderr F RuntimeError: CUDA out of memory",
        b"2026-12-04T08:54:17.3Z stdout F checkpoint shards: 100%",
    ]
    data = b"\n".join(records) + b"\n"
    assert _unwrap(data) == [
        (len(records[0]) + 1, "2026-12-04T08:54:17.2Z stderr F RuntimeError: CUDA out of memory"),
        (0, "2026-12-04T08:54:17.1Z stdout P Loading safetensors checkpoint shards: 100%"),
    ]


def test_a_line_of_many_records_is_kept_to_max_line() -> None:
    """A line made of endless partial records is held only to max_line bytes, as the Framer holds a line."""
    data = b"".join(b"2026-12-04T08:54:17Z stdout P " + b"a" * 10 + b"\n" for _ in range(100))
    data += b"2026-12-04T08:54:17Z stdout F end\n"
    [(offset, text)] = _unwrap(data, max_line=64)
    assert offset == 0
    assert text == ("2026-12-04T08:54:17Z stdout P " + "a" * 100)[:64]


def test_lines_that_are_no_records_pass_as_they_are() -> None:
    """A line of a JSON log that is no JSON, or no record of its format, is read as it is."""
    data = b'{"log":"one\\n","stream":"stdout","time":"2026-12-04T08:54:17Z"}\nnot json\n{"other": 1}\n'
    assert _texts(_unwrap(data)) == ["2026-12-04T08:54:17Z one", "not json", '{"other": 1}']


def test_a_plain_logs_blocks_pass_untouched() -> None:
    """A log whose first line is no record: every block is returned as the Framer made it."""
    unwrapper = Unwrapper()
    blocks = [Block(0, b"[2025-07-02 07:31:02 DP0 TP0 EP0] Init torch distributed begin.\n")]
    assert unwrapper.feed(blocks) is blocks
    assert unwrapper.format == "plain"
    more = [Block(66, b'{"log":"x\\n","stream":"stdout","time":"2026-12-04T08:54:17Z"}\n')]
    assert unwrapper.feed(more) is more


@pytest.mark.parametrize(
    "name",
    ["cri-oom.log", "docker-json-file-oom.log", "journald-json-oom.log", "journald-short-iso-oom.log",
     "journald-short-iso-precise-oom.log", "journald-short-oom.log", "docker-logs-timestamps-oom.log"],
)  # fmt: skip
def test_the_example_stored_by_a_platform_gives_the_plain_logs_verdict(name: str) -> None:
    """The bundled example's OOM, as Docker, journald or a CRI runtime stored it, is the plain log's verdict:
    crashed while allocating the KV cache, category oom, on the same ranks, with the same summary."""
    _, plain = replay_path(EXAMPLE)
    _, stored = replay_path(FORMATS / name)
    want, got = plain.to_json(), stored.to_json()
    for key in ("state", "phase", "engine"):
        assert got[key] == want[key]
    assert {k: got["error"][k] for k in ("category", "summary", "ranks")} == {
        k: want["error"][k] for k in ("category", "summary", "ranks")
    }


def test_the_durations_come_from_the_records_times() -> None:
    """A journald JSON log's phases are timed by its entries' times: the launch starts at the first entry's."""
    data = b"".join(
        json.dumps({"MESSAGE": m, "__REALTIME_TIMESTAMP": str(t), "_PID": "1"}).encode() + b"\n"
        for m, t in (("no clock of its own", 1796374457000000), ("still none", 1796374517000000))
    )
    analyzer = Analyzer(load_engine("generic"))
    analyzer.feed(data, 0.0)
    analyzer.finish(1.0)
    start, seconds = analyzer.lifecycle.current.timeline[0]
    assert (start.at, seconds) == ("2026-12-04T08:54:17", 1796374457.0)


def test_a_restart_between_partial_records_loses_and_repeats_nothing() -> None:
    """An analyzer stopped between the P records of a line, its resume record restored into a new one that reads
    on from the next byte, gives the verdict of reading the whole log at once."""
    data = (FORMATS / "cri-special.log").read_bytes() + (FORMATS / "cri-oom.log").read_bytes()
    cut = data.index(b" stderr P ", data.index(b" stderr P ") + 1)  # inside the second P record
    first = Analyzer(load_engine("sglang"))
    first.feed(data[:cut], 0.0)
    record = json.loads(json.dumps(to_record(first)))
    assert record["formats.format"] == "cri"
    assert record["formats.pending"]["stderr"][0] == data.index(b"2026-12-04T17:34:01.265552273Z")
    second = Analyzer(load_engine("sglang"))
    restore(second, record)
    second.feed(data[cut:], 1.0)
    second.finish(2.0)
    whole = Analyzer(load_engine("sglang"))
    whole.feed(data, 0.0)
    whole.finish(2.0)
    assert second.lines_read == whole.lines_read
    assert second.lifecycle.current.error == whole.lifecycle.current.error
    assert second.state == whole.state


def test_passes_tells_the_blocks_feed_returns_untouched() -> None:
    """`passes`: a plain log's block, or a CRI log's of whole records with no line begun, is returned as it is;
    nothing passes while the format is unknown, a partial record does not, nor a record after one."""
    plain = Unwrapper()
    assert not plain.passes(b"hello\n")
    plain.feed([Block(0, b"hello\n")])
    assert plain.passes(b"world\n")
    whole = b"2026-12-04T08:54:17.831019227Z stderr F whole\n"
    part = b"2026-12-04T08:54:17.831019227Z stderr P part\n"
    cri = Unwrapper()
    assert cri.feed([Block(0, whole)]) == [Block(0, whole)]
    assert cri.passes(whole)
    assert not cri.passes(part)
    cri.feed([Block(len(whole), part)])
    assert not cri.passes(whole)  # it ends the line the partial record began
