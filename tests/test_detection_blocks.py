"""Engine detection a block at a time: `EngineDetector.feed_lines` reads as `feed` line by line, and the markers
Hyperscan finds in a line are those each engine's searches find."""

from __future__ import annotations

import random
from pathlib import Path

from watchdog.core.detection import EngineDetector, _any_marker, _AnyMarker, _engines_of, _runs
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
    one by one do (the counts, the scores, the open tracebacks and the engine named)."""
    markers = catalogue().markers
    rng = random.Random(31)
    for log in LOGS:
        lines = log.read_bytes().decode("utf-8", "replace").splitlines()[:_HEAD]
        by_line, by_block = EngineDetector(markers), EngineDetector(markers)
        pos = 0
        while pos < len(lines):
            block = lines[pos : pos + rng.randint(1, 20)]
            for line in block:
                by_line.feed(line)
            by_block.feed_lines(block)
            pos += len(block)
            assert _state(by_block) == _state(by_line), f"{log} after line {pos}"


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


def test_the_lines_holding_a_marker_are_the_same_with_hyperscan_and_the_regex() -> None:
    """On every fixture log's head, in blocks, and on lines with a line break inside, the lines found to hold a
    marker are those the one regex finds (Hyperscan's pass, where it is installed, and the regex agree)."""
    words = [m for _, m in catalogue().markers]
    fast, slow = _AnyMarker(words), _AnyMarker(words)
    slow._prefilter = None  # the regex, as without Hyperscan
    rng = random.Random(7)
    seen = 0
    for log in LOGS:
        lines = log.read_bytes().decode("utf-8", "replace").splitlines()[:_HEAD]
        pos = 0
        while pos < len(lines):
            block = lines[pos : pos + rng.randint(1, 50)]
            assert fast.marked(block) == slow.marked(block), f"{log} at line {pos}"
            assert [fast.holds(line) for line in block] == [slow.holds(line) for line in block]
            seen += len(slow.marked(block))
            pos += len(block)
    assert seen > 1000
    odd = ["no marker\nhere", "SGLang is here \n twice SGLang", "", "é vLLM", "\ud800 Ollama"]
    assert fast.marked(odd) == slow.marked(odd)
