"""The daemon's CPU split into what a steady line costs and what a crash and its relaunch cost (issue 31, CPU round 11).

Interleaved rounds of `daemon_bench.py` runs on one tree: with no crash at all (`--serve-seconds inf inf`: steady
serving lines alone), with the usual crashes (8-20 s of serving, ~11 a second at 200 launches) and, unless
`--no-fast`, with more (`--serve-seconds 3 6`, ~27 a second). A steady line's cost is the no-crash run's CPU over its
lines a second; a crash and relaunch's is what a run with crashes spent beyond its serving lines at that price, over
its crashes a second (the relaunch's startup lines and the crash's own lines come with each crash, and are counted
in it). Each round's figures, then the medians.

    python benchmarks/churn_split.py [--rounds 3] [--tree DIR] [--no-fast] [-- DAEMON_BENCH_ARGS]

The bench's arguments default to `--local --seconds 20 --quiet-seconds 2 --quiet-lead 2 --no-anchor`.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import daemon_bench  # noqa: E402 - the writer's corpus and timing, beside this script

DEFAULT_BENCH = ["--local", "--seconds", "20", "--quiet-seconds", "2", "--quiet-lead", "2", "--no-anchor"]
VARIANTS = {"none": ["--serve-seconds", "inf", "inf"], "usual": [], "fast": ["--serve-seconds", "3", "6"]}


@dataclass(frozen=True)
class Run:
    """What one `daemon_bench.py` run printed: the daemon's CPU under load (% of a core), the lines written a
    second, the crashes judged a second in the window, the load average at its end."""

    cpu: float
    lines_per_second: float
    crashes_per_second: float
    load: float


def parse(text: str, seconds: float) -> Run:
    """A run's figures from `daemon_bench.py`'s output (`seconds`: its `--seconds`)."""
    cpu = float(re.search(r"CPU, logs growing\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]
    wrote = re.search(r"writer wrote ([\d,]+) lines, [\d.]+ MB in (\d+) s", text)
    crashes = re.search(r"(\d+) crashes in the window judged", text)
    load = re.search(r"load \(([\d.]+)", text)
    assert wrote is not None, text
    assert crashes is not None, text
    assert load is not None, text
    return Run(
        cpu,
        int(wrote.group(1).replace(",", "")) / float(wrote.group(2)),
        int(crashes.group(1)) / seconds,
        float(load.group(1)),
    )


def lines_a_crash() -> int:
    """The lines that come with each crash: the crash's own and the relaunch's startup."""
    startup, _serving, crash = daemon_bench._corpus()
    return len(startup) + crash.count(b"\n")


def split(steady: Run, loaded: Run, per_crash: int) -> tuple[float, float, float]:
    """(µs a steady line, ms a crash and relaunch, the crashes' share of `loaded`'s CPU, %)."""
    line = steady.cpu / 100 / steady.lines_per_second
    serving = loaded.lines_per_second - loaded.crashes_per_second * per_crash
    churn = loaded.cpu / 100 - line * serving
    return 1e6 * line, 1e3 * churn / loaded.crashes_per_second, 100 * churn / (loaded.cpu / 100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="the checkout whose daemon runs (default this script's)")
    parser.add_argument("--no-fast", action="store_true", help="no run with more crashes")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="daemon_bench.py's arguments, after --")
    args = parser.parse_args(argv)
    bench = [a for a in args.bench if a != "--"] or DEFAULT_BENCH
    seconds = float(bench[bench.index("--seconds") + 1]) if "--seconds" in bench else 60.0
    tree = ["--tree", str(args.tree)] if args.tree is not None else []
    variants = [v for v in VARIANTS if not (args.no_fast and v == "fast")]
    per_crash = lines_a_crash()
    lines: list[float] = []
    ms: dict[str, list[float]] = {v: [] for v in variants if v != "none"}
    shares: list[float] = []
    for r in range(1, args.rounds + 1):
        runs = {}
        for v in variants:
            command = [sys.executable, str(HERE / "daemon_bench.py"), *bench, *tree, *VARIANTS[v]]
            out = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ).stdout
            runs[v] = parse(out, seconds)
        said = []
        for v, each in ms.items():
            line, crash_ms, share = split(runs["none"], runs[v], per_crash)
            each.append(crash_ms)
            shares += [share] if v == "usual" else []
            said.append(
                f"{v} {runs[v].cpu:.1f} % ({runs[v].crashes_per_second:.1f} crashes/s, load {runs[v].load:.1f}): "
                f"{crash_ms:.2f} ms a crash+relaunch, {share:.0f} % of the CPU"
            )
        lines.append(line)
        print(
            f"round {r}: no crash {runs['none'].cpu:.1f} % (load {runs['none'].load:.1f}): {line:.1f} us a line; "
            + "; ".join(said),
            flush=True,
        )
    print(
        f"median of {args.rounds}: {statistics.median(lines):.1f} us a steady line; "
        + "; ".join(f"{v} {statistics.median(x):.2f} ms a crash+relaunch" for v, x in ms.items())
        + f"; the crashes' share at the usual mix {statistics.median(shares):.0f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
