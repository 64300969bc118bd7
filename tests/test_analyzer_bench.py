"""benchmarks/analyzer_bench.py: daemon_bench's writes, on a virtual clock, through one analyzer per launch."""

from __future__ import annotations

from benchscripts import load_script

analyzer_bench = load_script("analyzer_bench.py")


def test_the_writes_are_daemon_bench_s() -> None:
    """The writes follow the writer's cycle: each launch starts ready, serves, crashes in one write, starts again."""
    _startup, _serving, crash = analyzer_bench.daemon_bench._corpus()
    first, load = analyzer_bench.writes(3, 30.0, 1)
    assert len(first) == 3
    crashes = [(i, at) for i, at, data in load if data == crash]
    assert {i for i, _ in crashes} == {0, 1, 2}  # every launch crashes within 20 s of serving
    assert all(at < 30.0 for _, at, _ in load)
    assert [at for _, at, _ in load] == sorted(at for _, at, _ in load)


def test_each_crash_written_is_a_crash_seen() -> None:
    """Run through analyzers, every crash written is a `crashed` transition of its launch, and the CPU is timed."""
    _startup, _serving, crash = analyzer_bench.daemon_bench._corpus()
    first, load = analyzer_bench.writes(2, 25.0, 3)
    seconds, seen = analyzer_bench.run(first, load)
    assert seconds > 0
    for launch in range(2):
        written = sum(1 for i, _, data in load if i == launch and data == crash)
        crashed = [t for t in seen[launch] if t[0] == "crashed"]
        assert written >= 1
        assert len(crashed) == written


def test_one_line_splits_each_write_into_its_lines_in_order() -> None:
    """`--one-line` feeds the same bytes at the same times, one line a feed: each write's lines, in order."""
    _first, load = analyzer_bench.writes(3, 30.0, 1)
    split = analyzer_bench.one_line(load)
    assert all(data.count(b"\n") == 1 and data.endswith(b"\n") for _, _, data in split)
    assert len(split) > len(load)
    for launch in range(3):
        assert b"".join(d for i, _, d in split if i == launch) == b"".join(
            d for i, _, d in load if i == launch
        )
    assert [at for _, at, _ in split] == sorted(at for _, at, _ in split)


def test_each_write_is_of_the_kind_of_lines_it_holds() -> None:
    """`--by-kind` counts each write (whole or one line of it) as startup, serving or crash lines: those the writer
    took it from."""
    startup, serving, crash = analyzer_bench.daemon_bench._corpus()
    _first, load = analyzer_bench.writes(3, 30.0, 1)
    for writes in (load, analyzer_bench.one_line(load)):
        kinds = analyzer_bench.kinds(writes)
        assert set(kinds) == {"startup", "serving", "crash"}
        for kind, (_, _, data) in zip(kinds, writes, strict=True):
            source = {"startup": startup, "serving": serving, "crash": crash.splitlines(keepends=True)}[kind]
            assert all(line in source for line in data.splitlines(keepends=True))
    first, load = analyzer_bench.writes(2, 25.0, 3)
    analyzer_bench.run(first, load, analyzer_bench.kinds(load))
    assert set(analyzer_bench.KIND_SECONDS) == {"startup", "serving", "crash"}
    assert all(seconds > 0 for seconds in analyzer_bench.KIND_SECONDS.values())
