"""The analyzer's instructions per line of each kind, by callgrind: what CPU time cannot tell on a busy machine.

`analyzer_bench.py`'s workload (daemon_bench's writes: an SGLang startup in each log, serving lines, a crash,
the startup again), fed a line a read (`--whole-writes`: a write a read), as `analyzer_bench.run` feeds it; one
uncounted round, then one round in which the writes of one kind go through `functools.reduce`, the C function
that callgrind is told to count inside (`--toggle-collect`): only those feeds, with their `caught_up`, `next_due`
and due ticks, are counted. One valgrind run a kind; `PYTHONHASHSEED=0` so that two trees read the same. The tree
measured is the one `watchdog` is imported from (run it from each tree, PYTHONPATH=.).

    PYTHONPATH=. python benchmarks/analyzer_instructions.py [--kinds startup serving crash] [--whole-writes]

A kind may be narrowed to the writes read while the log's engine is provisional (its first 200 lines, the head
still read for detection) or settled: `crash-provisional`, `startup-settled`, `serving-provisional`, ...
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analyzer_bench

from watchdog.core.analyzer import Analyzer
from watchdog.profiles.loader import catalogue

Write = analyzer_bench.Write


def _step(analyzer: Analyzer, write: Write) -> Analyzer:
    # one write as `analyzer_bench.run` feeds it (the transitions are not kept: the count is the analyzer's)
    _, at, data = write
    analyzer.feed(data, at)
    analyzer.caught_up(at)
    due = analyzer.next_due()
    if due is not None and due <= at:
        analyzer.tick(at)
    return analyzer


def _inner(kind: str, whole: bool) -> None:
    # under valgrind: an uncounted round, then a round with `kind`'s writes counted; their lines printed
    first, load = analyzer_bench.writes(20, 60.0, 1)
    if not whole:
        load = analyzer_bench.one_line(load)
    kinds = analyzer_bench.kinds(load)
    # "crash-provisional": the crash writes read while the log's engine is not settled (its first 200 lines);
    # "startup-settled": a relaunch's startup lines in a log whose head settled its engine; and so on
    base, _, when = kind.partition("-")
    cat = catalogue()
    lines = 0
    for counted in (False, True):
        analyzers = [Analyzer(cat) for _ in first]
        for analyzer, data in zip(analyzers, first, strict=True):
            analyzer.feed(data, 0.0)
            analyzer.caught_up(0.0)
        for write, of in zip(load, kinds, strict=True):
            analyzer = analyzers[write[0]]
            if counted and of == base and (not when or analyzer._provisional == (when == "provisional")):
                functools.reduce(_step, [write], analyzer)
                lines += write[2].count(b"\n")
            else:
                _step(analyzer, write)
    print("LINES", lines)


def main(argv: list[str] | None = None) -> int:
    """Print the instructions a line of each kind."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", default=["startup", "serving", "crash"])
    parser.add_argument("--whole-writes", action="store_true", help="a write a read, not a line a read")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _inner(args.inner, args.whole_writes)
        return 0
    for kind in args.kinds:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            sys.executable,
            __file__,
            "--inner",
            kind,
            *(["--whole-writes"] if args.whole_writes else []),
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        counted = re.search(r"Collected : (\d+)", done.stderr)
        lines = re.search(r"LINES (\d+)", done.stdout)
        assert counted is not None
        assert lines is not None
        print(f"{kind}: {int(counted[1]) / int(lines[1]) / 1000:.1f}k instructions a line ({lines[1]} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
