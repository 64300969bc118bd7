"""How often the daemon does each thing under `daemon_bench.py`'s load, per second and per crash: reads against
lines, verdict builds, status snapshots, store batches, ticks, timers, callbacks of the event loop.

Runs `daemon_bench.py` with the arguments given (the tree's own: run it with PYTHONPATH at the tree measured)
with `benchmarks/counts/` on the daemon's PYTHONPATH: its `sitecustomize` wraps the daemon's functions named
there and writes their totals once a second (calls; the thread CPU of those that are not coroutines, inclusive,
the wrappers' own cost in it). The window is the seconds in which the analyzer was fed more than 500 chunks,
less two at each end; a crash is one `LaunchFollower._settle` started. The wrappers slow the daemon (about
a fifth): counts are the figure, CPU shares only between two trees run this way.

    PYTHONPATH=. python benchmarks/daemon_counts.py [--min RATE] -- --local --seconds 20 --quiet-seconds 5 --no-anchor
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def window(path: str) -> tuple[float, dict[str, int], dict[str, int]]:
    """(seconds, calls, thread ns) of the load window of one daemon's counts file."""
    with open(path) as file:
        rows = [json.loads(line) for line in file]
    pairs = [
        (a, b)
        for a, b in itertools.pairwise(rows)
        if (b["calls"].get("Analyzer.feed", 0) - a["calls"].get("Analyzer.feed", 0)) / (b["t"] - a["t"]) > 500
    ][2:-2]
    if not pairs:
        raise SystemExit(f"{path}: no second under load")
    first, last = pairs[0][0], pairs[-1][1]
    calls = {k: v - first["calls"].get(k, 0) for k, v in last["calls"].items()}
    ns = {k: v - first["ns"].get(k, 0) for k, v in last["ns"].items()}
    return last["t"] - first["t"], calls, ns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--min", type=float, default=0.5, help="leave out what happened less often (a second)"
    )
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="daemon_bench.py's arguments, after --")
    args = parser.parse_args(argv)
    bench = [a for a in args.bench if a != "--"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "counts")
        path = os.pathsep.join(filter(None, (str(HERE / "counts"), os.environ.get("PYTHONPATH", ""))))
        env = {**os.environ, "COUNT_OUT": out, "PYTHONPATH": path}
        subprocess.run([sys.executable, str(HERE / "daemon_bench.py"), *bench], env=env, check=True)
        [counts] = glob.glob(out + ".*")
        seconds, calls, ns = window(counts)
    crashes = max(calls.get("LaunchFollower._settle", 0), 1)
    print(f"\nload window {seconds:.0f} s, {crashes / seconds:.1f} crashes a second")
    print(f"{'a second':>10} {'a crash':>8} {'CPU us/s':>9} {'us a call':>9}  what")
    for name, n in sorted(calls.items(), key=lambda kv: -kv[1]):
        if n / seconds < args.min:
            continue
        cpu = ns.get(name)
        said = f"{cpu / seconds / 1e3:9.0f} {cpu / n / 1e3:9.1f}" if cpu else f"{'':9} {'':9}"
        print(f"{n / seconds:10.1f} {n / crashes:8.2f} {said}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
