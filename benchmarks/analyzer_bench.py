"""The analyzer's CPU per line on daemon_bench's workload, in process: its logs, in its blocks, no daemon around.

daemon_bench's writer grows each log with an SGLang startup, serving lines (1 line a 100 ms tick, one tick in
20 a burst of 8 to 16) and a crash (one write), then the startup again; the daemon reads each write as one
block. Here the same writes (the writer's own code, on a virtual clock) go to one `Analyzer` per launch, which
starts, as the daemon's, on a log that holds a startup already (read whole, then caught up), and is ticked
as the follower ticks it (at each write and at `next_due`). What is timed is `time.process_time` of the feeds
and ticks alone; the writes are made beforehand, and one untimed round comes first (what a daemon makes once).
The tree measured is the script's own: to compare with another, run its copy in that tree.
`--one-line` splits each write into its lines, fed one at a time (each followed by `caught_up`), as a daemon
reads a log that grows a line at a time: the analyzer's fixed cost per feed, as a daemon pays it.
`--by-kind` also prints the CPU per line of each kind of write (startup, serving, crash lines), each write timed
on its own (the clock's reads, about a microsecond a write, are counted in them; the total is timed as without).

    python benchmarks/analyzer_bench.py [--launches 20] [--seconds 60] [--rounds 5] [--seed 1] [--one-line]
        [--by-kind]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from watchdog.core.analyzer import Analyzer  # noqa: E402 - the tree's own package, not an installed one
from watchdog.profiles.loader import catalogue  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import daemon_bench  # noqa: E402

Write = tuple[int, float, bytes]  # launch, time (s), bytes


def writes(launches: int, seconds: float, seed: int) -> tuple[list[bytes], list[Write]]:
    """Each launch's first content (a startup), and the writes daemon_bench's writer makes in `seconds`, in
    order, on a virtual clock."""
    startup, serving, crash = daemon_bench._corpus()
    rng = random.Random(seed)
    logs = [daemon_bench._Log(str(i), -1, until=rng.uniform(2.0, 20.0)) for i in range(launches)]
    out: list[Write] = []
    serve_at = 0
    now = 0.0
    while now < seconds:
        for i, log in enumerate(logs):
            crashes_now, data, serve_at = daemon_bench.next_write(log, now, rng, startup, serving, serve_at)
            if crashes_now:
                out.append((i, now, crash))
            if data:
                out.append((i, now, data))
        now = round(now + daemon_bench.TICK, 6)  # no drift of the sum over a long run
    return [b"".join(startup)] * launches, out


def one_line(load: list[Write]) -> list[Write]:
    """`load` with each write split into its lines, one write each, in order, at the write's time."""
    return [(i, at, line) for i, at, data in load for line in data.splitlines(keepends=True)]


def kinds(load: list[Write]) -> list[str]:
    """The kind of each write of `load` (whole or one line of it): "startup", "serving" or "crash" lines, by its
    first line (the writer never mixes them in a write)."""
    startup, serving, crash = daemon_bench._corpus()
    of_line = dict.fromkeys(crash.splitlines(keepends=True), "crash")
    of_line.update(dict.fromkeys(serving, "serving"))
    of_line.update(dict.fromkeys(startup, "startup"))
    return [of_line[data[: data.find(b"\n") + 1]] for _, _, data in load]


def run(
    first: list[bytes], load: list[Write], by_kind: list[str] | None = None
) -> tuple[float, list[list[tuple[str, int, int | None]]]]:
    """Feed every launch's first content and then `load` to an analyzer each; the CPU seconds it took, and
    each launch's transitions (state, incarnation, line). `by_kind`: the kind of each write (`kinds`); the CPU
    seconds of each kind's writes are then added up in `KIND_SECONDS`."""
    cat = catalogue()
    analyzers = [Analyzer(cat) for _ in first]
    seen: list[list[tuple[str, int, int | None]]] = [[] for _ in first]
    KIND_SECONDS.clear()
    clock = time.process_time
    began = clock()
    for i, data in enumerate(first):
        out = analyzers[i].feed(data, 0.0) + analyzers[i].caught_up(0.0)
        seen[i] += [(t.state.value, t.incarnation, t.line) for t in out]
    for k, (i, at, data) in enumerate(load):
        analyzer = analyzers[i]
        write_began = clock() if by_kind is not None else 0.0
        out = analyzer.feed(data, at) + analyzer.caught_up(at)
        due = analyzer.next_due()
        if due is not None and due <= at:
            out += analyzer.tick(at)
        if by_kind is not None:
            KIND_SECONDS[by_kind[k]] = KIND_SECONDS.get(by_kind[k], 0.0) + clock() - write_began
        seen[i] += [(t.state.value, t.incarnation, t.line) for t in out]
    return clock() - began, seen


KIND_SECONDS: dict[str, float] = {}  # the last `run`'s CPU seconds of each kind of write, with `by_kind`


def main(argv: list[str] | None = None) -> int:
    """Print the CPU per line (median of the rounds)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--one-line", action="store_true", help="feed each write's lines one at a time")
    parser.add_argument("--by-kind", action="store_true", help="also the CPU a line of each kind of write")
    args = parser.parse_args(argv)
    first, load = writes(args.launches, args.seconds, args.seed)
    if args.one_line:
        load = one_line(load)
    by_kind = kinds(load) if args.by_kind else None
    lines = sum(d.count(b"\n") for d in first) + sum(d.count(b"\n") for _, _, d in load)
    # untimed: profiles loaded, regexes and Hyperscan databases made (a daemon's first minute)
    run(first, load)
    times, of_kind = [], []
    for _ in range(args.rounds):
        times.append(run(first, load, by_kind)[0])
        of_kind.append(dict(KIND_SECONDS))
    median = statistics.median(times)
    print(
        f"{lines} lines in {len(load)} writes over {args.launches} launches: "
        f"{median * 1e6 / lines:.1f} us of CPU a line (median of {args.rounds}: "
        + ", ".join(f"{t:.3f}" for t in times)
        + " s)"
    )
    if by_kind is not None:
        count = dict.fromkeys(("startup", "serving", "crash"), 0)
        for kind, (_, _, data) in zip(by_kind, load, strict=True):
            count[kind] += data.count(b"\n")
        print(
            "by kind (us of CPU a line, median of the rounds): "
            + ", ".join(
                f"{kind} {statistics.median(k[kind] for k in of_kind) * 1e6 / n:.1f} ({n} lines)"
                for kind, n in count.items()
                if n
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
