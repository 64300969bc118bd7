"""Time to a crash verdict on a complete local log: `watchdog watch LOG --json` and `watchdog replay LOG --json`.

    python benchmarks/local_verdict.py [--runs 3] [--logs 40] [--watchdog PATH]

On a log already written, the verdict is all start-up and reading: what an operator waits for after
`watchdog watch server.log` on a launch that already died, and what ../shared/tools/live-vs-replay times.
Takes the corpus logs whose replay verdict is `crashed` (every k-th, `--logs` of them), runs each command on
each `--runs` times one after another (no other load of ours), and prints the median and p90 of wall time and
of CPU time (user + system of the child). The anchors: `python3 -c pass` (the floor of any Python program)
and `tail -n 20 LOG` (what the habit reads). Use an installed watchdog (`--watchdog`, default: the one beside
this Python, else on PATH): an editable install under PYTHONDONTWRITEBYTECODE compiles every module on every start.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"


def _timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--logs", type=int, default=40)
    beside = Path(sys.executable).with_name("watchdog")  # this Python's install
    parser.add_argument("--watchdog", default=str(beside) if beside.exists() else shutil.which("watchdog"))
    args = parser.parse_args()
    # no `watchdog` installed (a checkout run with PYTHONPATH): this Python runs the package's CLI
    wd = [args.watchdog] if args.watchdog else [sys.executable, "-m", "watchdog.cli"]
    crashed = []
    for log in sorted(CORPUS.glob("*/*.log")):
        done = subprocess.run(
            [*wd, "replay", "--json", str(log)], capture_output=True, text=True, check=False
        )
        if done.returncode == 1 and json.loads(done.stdout)["state"] == "crashed":
            crashed.append(log)
    step = max(1, len(crashed) // args.logs)
    logs = crashed[::step][: args.logs]
    commands = {
        "watch": lambda log: [*wd, "watch", str(log), "--json", "--timeout", "20"],
        "replay": lambda log: [*wd, "replay", "--json", str(log)],
        "python3 -c pass": lambda log: [sys.executable, "-c", "pass"],
        "tail -n 20": lambda log: ["tail", "-n", "20", str(log)],
    }
    print(
        f"{len(logs)} crash logs of {len(crashed)}, {args.runs} runs each, one at a time; watchdog: {' '.join(wd)}"
    )
    for name, command in commands.items():
        walls, cpus = [], []
        for _ in range(args.runs):
            for log in logs:
                wall, cpu, done = _timed(command(log))
                if name in ("watch", "replay") and done.returncode != 1:
                    sys.exit(f"{name} {log}: exit {done.returncode}, not the crash verdict (1)")
                walls.append(wall)
                cpus.append(cpu)
        print(
            f"{name:16s} wall p50 {statistics.median(walls) * 1000:.0f} ms p90 {_p90(walls) * 1000:.0f} ms; "
            f"cpu p50 {statistics.median(cpus) * 1000:.0f} ms p90 {_p90(cpus) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
