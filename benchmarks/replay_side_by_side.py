"""Replay the same logs with several trees of the watchdog and grep, interleaved, on one CPU: medians and ratios.

On a shared, noisy machine absolute figures mean little; runs of two trees back to back, round after round, give
ratios that do. Each run is a fresh `python -m watchdog.cli replay LOG --json` in the tree's folder (process start
included), and `grep -c -E` of the markers `benchmarks/report.py` counts is the anchor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from replay_bench import Run, count_lines, pin_to_one_cpu, run_once
from report import GREP_MARKERS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("logs", nargs="+", type=Path, help="logs to replay")
    parser.add_argument(
        "--tree", action="append", required=True, help="NAME=PATH: a checkout of the watchdog (repeat it)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every tool once (default 3)")
    args = parser.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.tree)
    cpu = pin_to_one_cpu()
    runs: dict[tuple[str, str], list[Run]] = {}
    for done in range(args.rounds):
        for log in args.logs:
            for name, tree in trees.items():
                cmd = [sys.executable, "-m", "watchdog.cli", "replay", str(log.resolve()), "--json"]
                runs.setdefault((str(log), name), []).append(run_once(cmd, cwd=Path(tree)))
            grep = ["env", "LC_ALL=C", "grep", "-c", "-E", GREP_MARKERS, str(log)]
            runs.setdefault((str(log), "grep"), []).append(run_once(grep))
        print(f"round {done + 1}: load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    print(f"pinned to CPU {cpu}; medians of {args.rounds} rounds; load average now {os.getloadavg()}")
    for log in args.logs:
        lines = count_lines(log)
        outputs = {runs[(str(log), name)][-1].stdout for name in trees}
        print(f"\n{log}: {lines:,} lines; the trees' verdict JSON identical: {len(outputs) == 1}")
        medians = {}
        for tool in (*trees, "grep"):
            measured = runs[(str(log), tool)]
            wall = statistics.median(r.wall for r in measured)
            cpu_s = statistics.median(r.cpu for r in measured)
            medians[tool] = (wall, cpu_s)
            print(
                f"  {tool:<8} wall {wall:7.3f} s {lines / wall:>12,.0f} lines/s   CPU {cpu_s:7.3f} s "
                f"{lines / cpu_s:>12,.0f} lines/s   (walls: {', '.join(f'{r.wall:.3f}' for r in measured)})"
            )
        grep_wall, grep_cpu = medians["grep"]
        for name in trees:
            wall, cpu_s = medians[name]
            print(f"  {name}: {grep_wall / wall:.3f} of grep's lines/s (wall), {grep_cpu / cpu_s:.3f} (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
