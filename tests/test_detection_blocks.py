"""Engine detection a block at a time: `EngineDetector.feed_lines` reads as `feed` line by line, and the markers
Hyperscan finds in a line are those each engine's searches find."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.detection import EngineDetector, _any_marker, _engines_of, _runs
from watchdog.core.templates import template
from watchdog.profiles.loader import catalogue

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted(p for p in FIXTURES.rglob("*.log") if "heldout" not in p.relative_to(FIXTURES).parts)
_HEAD = 400  # lines of each log: past the 200 of a head, so that tracebacks and chains come into it


def _state(detector: EngineDetector) -> tuple[object, ...]:
    return (
        detector.count,
        detector.score,
        detector._chain,
        detector._owner,
        detector._frames,
        detector.engine(),
    )


def test_a_head_fed_in_blocks_reads_as_fed_line_by_line() -> None:
    """On every fixture log, blocks of 1 to 20 lines leave the detector, after each block, as the same lines fed
    one by one do (the counts, the scores, the open tracebacks and the engine named), with Hyperscan and without."""
    markers = catalogue().markers
    rng = random.Random(31)
    for log in LOGS:
        lines = log.read_bytes().decode("utf-8", "replace").splitlines()[:_HEAD]
        by_line, by_block, searched = (
            EngineDetector(markers),
            EngineDetector(markers),
            EngineDetector(markers),
        )
        searched._any = (searched._any[0], None)  # as without Hyperscan: one search over the block first
        pos = 0
        while pos < len(lines):
            block = lines[pos : pos + rng.randint(1, 20)]
            for line in block:
                by_line.feed(line)
            by_block.feed_lines(block)
            searched.feed_lines(block)
            pos += len(block)
            assert _state(by_block) == _state(by_line), f"{log} after line {pos}"
            assert _state(searched) == _state(by_line), f"{log} after line {pos}"


def test_a_head_read_by_its_templates_reads_as_fed_line_by_line() -> None:
    """On every fixture log, each ASCII line offered first to `feed_template` (by its template; `feed` when it
    declines) leaves the detector as `feed` of the line does, after each line; read a second time (a crash loop's
    relaunch writes its startup again), most lines are taken by their template."""
    markers = catalogue().markers
    if _any_marker(markers)[1] is None:
        pytest.skip("feed_template reads templates that Hyperscan's index keeps")
    taken = offered = 0
    for log in LOGS:
        head = []  # the head as `_feed_provisional` reads it a line a read: lines of ASCII, one each
        for data in log.read_bytes().splitlines(keepends=True)[: _HEAD // 2]:
            if not data.endswith(b"\n") or not data.isascii() or len(data[:-1].splitlines()) > 1:
                break
            head.append(data)
        by_line, by_template = EngineDetector(markers), EngineDetector(markers)
        for again, data in [(False, d) for d in head] + [(True, d) for d in head]:
            line, key = data[:-1].decode("ascii"), template(data)
            by_line.feed(line)
            offered += again
            if by_template.feed_template(data, key):
                taken += again
            else:
                by_template.feed(line, key)
            assert _state(by_template) == _state(by_line), f"{log}: {data!r}"
    assert taken > offered // 2, (taken, offered)


class _Counted(EngineDetector):
    """An `EngineDetector` that counts the lines `feed` reads (those its templates did not tell)."""

    def __init__(self, markers: tuple[tuple[str, str], ...]) -> None:
        super().__init__(markers)
        self.fed = 0

    def feed(self, line: str, key: bytes | None = None) -> None:
        self.fed += 1
        super().feed(line, key)


def test_a_head_s_blocks_read_by_their_templates_read_as_fed_line_by_line() -> None:
    """On every fixture log, its ASCII head in blocks of 1 to 20 lines given with their templates and bytes
    (`feed_lines(lines, keys, raws)`, as `_detect_head` gives a burst or a crash's traceback in one write) leaves the
    detector, after each block, as `feed` of each line does; read a second time (a crash loop's relaunch writes it
    again), most lines are taken by their template, not read by `feed`."""
    markers = catalogue().markers
    if _any_marker(markers)[1] is None:
        pytest.skip("feed_template reads templates that Hyperscan's index keeps")
    rng = random.Random(31)
    fed = total = 0
    for log in LOGS:
        head = []  # lines of ASCII with no other line break, each its newline last
        for data in log.read_bytes().splitlines(keepends=True)[: _HEAD // 2]:
            if not data.endswith(b"\n") or not data.isascii() or len(data[:-1].splitlines()) > 1:
                break
            head.append(data)
        by_line, by_block = EngineDetector(markers), _Counted(markers)
        for again in (False, True):
            pos = 0
            while pos < len(head):
                raws = head[pos : pos + rng.randint(1, 20)]
                lines = [raw[:-1].decode("ascii") for raw in raws]
                for line in lines:
                    by_line.feed(line)
                before = by_block.fed
                by_block.feed_lines(lines, [template(raw) for raw in raws], raws)
                if again:
                    fed, total = fed + by_block.fed - before, total + len(raws)
                pos += len(raws)
                assert _state(by_block) == _state(by_line), f"{log} after line {pos}"
    assert fed < total // 2, (fed, total)


def test_a_line_s_markers_are_found_in_one_pass() -> None:
    """For every fixture line that holds a marker, the engines of its markers, in the catalogue's order, are the
    same found in one pass (Hyperscan, where it is installed) as by each engine's search."""
    markers = catalogue().markers
    any_marker, index = _any_marker(markers)
    seen = 0
    for log in LOGS:
        for line in log.read_bytes().decode("utf-8", "replace").splitlines():
            if any_marker.holds(line):
                seen += 1
                assert _engines_of(line, markers, index) == _engines_of(line, markers, None)
    assert seen > 1000


def test_the_per_engine_searches_are_compiled_only_without_hyperscan() -> None:
    """With Hyperscan, a detector's start compiles no per-engine search (one pass finds a line's engines): a
    replay's start spends nothing on them."""
    markers = catalogue().markers
    _runs.cache_clear()
    detector = EngineDetector(markers)
    detector.feed_lines(["[2025-01-23 19:35:33] The server is fired up and ready to roll!", "more"])
    assert detector.engine() == "sglang"
    assert _runs.cache_info().currsize == (0 if _any_marker(markers)[1] is not None else 1)


def test_engine_named_again_after_a_line_that_changes_it() -> None:
    """The engine named is worked out again after a line with a marker, however many times it was asked before."""
    detector = EngineDetector(catalogue().markers)
    detector.feed("nothing here")
    assert detector.engine() is None
    assert detector.engine() is None
    detector.feed_lines(["[2025-01-23 19:35:33] The server is fired up and ready to roll!"])
    assert detector.engine() == "sglang"


def test_the_engine_named_after_each_line_is_the_one_counted_anew() -> None:
    """On every fixture log's head, asked after each line (so that a line holding only the named engine's
    markers keeps the name without counting again), the detector names the engine, with the same scores, that a
    detector never asked until then names."""
    markers = catalogue().markers
    for log in LOGS:
        detector, never_asked = EngineDetector(markers), EngineDetector(markers)
        for number, line in enumerate(log.read_bytes().decode("utf-8", "replace").splitlines()[:_HEAD], 1):
            detector.feed(line)
            never_asked.feed(line)  # counts every line's markers: nothing named to keep
            assert detector.engine() == never_asked.copy().engine(), f"{log} line {number}"
            assert detector.score == never_asked.score, f"{log} line {number}"


_PIECES = ["ab", "b", "cd", "x", " ", '  File "', "Traceback (most recent call last):", "ValueError: v"]


@settings(max_examples=300, deadline=None)
@given(
    markers=st.lists(st.tuples(st.sampled_from(["e1", "e2", "e3"]), st.sampled_from(["ab", "b", "cd", "x"]))),
    lines=st.lists(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), max_size=12),
)
def test_the_engine_named_line_by_line_is_the_one_counted_anew_for_any_markers(
    markers: list[tuple[str, str]], lines: list[str]
) -> None:
    """Whatever the markers (one line holding several engines', one text the marker of several engines) and
    tracebacks, the engine named after each line, and the scores, are those of a detector never asked."""
    detector = EngineDetector(tuple(markers))
    never_asked = EngineDetector(tuple(markers))  # counts every line's markers: nothing named to keep
    for line in lines:
        detector.feed(line)
        never_asked.feed(line)
        assert detector.engine() == never_asked.copy().engine()
        assert detector.score == never_asked.score


def test_every_launch_detects_with_one_markers_tuple() -> None:
    """The catalogue's (engine, marker) pairs are made once and shared by every launch's detection (a copy each
    held ~100 objects while its head was read): the user profiles' first, then each bundled engine's but the last."""
    c = catalogue()
    assert c.markers is c.markers
    assert c.markers == (
        *((p.name, d) for p in c.user for d in p.detect),
        *((name, d) for name, draft in c.bundled[:-1] for d in draft.detect),
    )
    assert len(c.markers) > 50


def test_a_head_fed_by_its_lines_templates_reads_as_fed_as_text() -> None:
    """On every fixture log, the ASCII lines of a head fed with their templates (the markers of a template looked
    up, as a live log's head is read) leave the detector as the lines fed as text do, line after line; the lines
    of a template seen again with other digits (another rank's " TP1] " where " TP0] " was) included."""
    markers = catalogue().markers
    for log in LOGS:
        lines = log.read_bytes().decode("utf-8", "replace").splitlines()[:_HEAD]
        lines += [line.translate(str.maketrans("0123456789", "1234567890")) for line in lines]
        as_text, by_template = EngineDetector(markers), EngineDetector(markers)
        for n, line in enumerate(lines, 1):
            as_text.feed(line)
            if line.isascii():
                by_template.feed(line, template(line.encode() + b"\n"))
            else:
                by_template.feed(line)
            assert _state(by_template) == _state(as_text), f"{log} at line {n}"
