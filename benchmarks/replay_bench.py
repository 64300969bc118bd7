"""Time `watchdog replay` against mtail on the same verbose log, and measure replay's peak memory."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MTAIL_PROGRAM = HERE / "watchdog.mtail"
GENERATOR = HERE / "gen_verbose_log.py"

GOAL_LINES_PER_SECOND = 1_000_000
GOAL_RATIO_OVER_MTAIL = 10.0
GOAL_RSS_MB = 100.0
# `watchdog replay` exit codes that are verdicts (ready, crashed, stalled, no verdict), not failures.
VERDICT_EXIT_CODES = {0, 1, 2, 3}


@dataclass(frozen=True)
class Run:
    """One run of one command: its times, its peak memory and what it printed."""

    wall: float
    user: float
    sys: float
    maxrss_mb: float
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def cpu(self) -> float:
        return self.user + self.sys


@dataclass(frozen=True)
class Result:
    """The best of several runs of one tool: each figure is its best (lowest) over the runs."""

    tool: str
    runs: list[Run]

    @property
    def wall(self) -> float:
        return min(r.wall for r in self.runs)

    @property
    def user(self) -> float:
        return min(r.user for r in self.runs)

    @property
    def sys(self) -> float:
        return min(r.sys for r in self.runs)

    @property
    def cpu(self) -> float:
        return min(r.cpu for r in self.runs)

    @property
    def maxrss_mb(self) -> float:
        return max(r.maxrss_mb for r in self.runs)

    @property
    def returncode(self) -> int:
        return self.runs[-1].returncode


# Starts the measured command as its own child and reports that child's wait4(2) figures. Linux counts
# in a process's ru_maxrss the image it had before exec (a copy of its parent), so a child of this
# benchmark could not read below the benchmark's own peak; this launcher is a bare interpreter (-I -S),
# smaller than any of the measured tools.
LAUNCHER = """
import os, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
code = os.waitstatus_to_exitcode(status)
with open(report, "w") as f:
    f.write(f"{wall} {usage.ru_utime} {usage.ru_stime} {usage.ru_maxrss} {code}")
sys.exit(code & 0xFF)
"""


def run_once(cmd: Sequence[str], *, cwd: Path = REPO) -> Run:
    """Run `cmd` to its end and measure exactly that process (and its waited-for children) with wait4(2).

    Unlike deltas of getrusage(RUSAGE_CHILDREN), whose ru_maxrss is the largest of all children so far
    (mtail's included), every run gets its own CPU times and peak RSS.
    """
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".rusage") as report,
    ):
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, report.name, *cmd]
        subprocess.run(launcher, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, check=False)
        wall, user, system, maxrss_kib, code = report.read().split()
        out.seek(0)
        err.seek(0)
        return Run(
            wall=float(wall),
            user=float(user),
            sys=float(system),
            maxrss_mb=int(maxrss_kib) * 1024 / 1e6,  # ru_maxrss is in KiB on Linux; the goal is in MB
            returncode=int(code),
            stdout=out.read(),
            stderr=err.read(),
        )


def best_of(tool: str, cmd: Sequence[str], runs: int) -> Result:
    return Result(tool, [run_once(cmd) for _ in range(runs)])


def watchdog_cmd(python: str, log: Path) -> list[str]:
    return [python, "-m", "watchdog.cli", "replay", str(log), "--json"]


def mtail_cmd(mtail: str, log: Path) -> list[str]:
    # --logtostderr: otherwise glog leaves mtail.* files in /tmp on every run.
    return [
        mtail,
        "--one_shot",
        "--one_shot_format",
        "json",
        "--logtostderr",
        "--progs",
        str(MTAIL_PROGRAM),
        "--logs",
        str(log),
    ]


def verdict(run: Run) -> dict[str, Any] | None:
    """The `--json` verdict a replay printed, or None when it printed none (replay not available)."""
    try:
        value = json.loads(run.stdout)
    except ValueError:
        return None
    if isinstance(value, dict) and "state" in value and run.returncode in VERDICT_EXIT_CODES:
        return value
    return None


def mtail_values(run: Run) -> dict[str, Any]:
    """Metric name -> value (or {label: value} for labelled metrics) from mtail's one-shot JSON."""
    values: dict[str, Any] = {}
    for name, entries in json.loads(run.stdout).items():
        for entry in entries:
            keys = entry.get("Keys")
            for label_value in entry.get("LabelValues", []):
                value = label_value["Value"]["Value"]
                labels = label_value.get("Labels")
                if keys and labels:
                    values.setdefault(name, {})[",".join(labels)] = value
                else:
                    values[name] = value
    return values


def count_lines(path: Path) -> int:
    count = 0
    last = b"\n"
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def ensure_log(workdir: Path, name: str, args: Sequence[str], *, regenerate: bool) -> Path:
    path = workdir / name
    if regenerate or not path.exists():
        print(f"generating {path} ...", file=sys.stderr, flush=True)
        partial = path.with_suffix(".partial")
        subprocess.run([sys.executable, str(GENERATOR), *args, "--out", str(partial)], check=True)
        partial.replace(path)
    return path


@contextlib.contextmanager
def workspace(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="watchdog-bench-") as tmp:
        yield Path(tmp)


def pin_to_one_cpu() -> int | None:
    """Pin this process, and so every child it starts, to one CPU; return it (None if not possible)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})
    except (AttributeError, OSError):
        return None
    return cpus[-1]


def rate(lines: int, seconds: float) -> str:
    return f"{lines / seconds:,.0f}" if seconds > 0 else "-"


def print_table(lines: int, results: Sequence[Result]) -> None:
    header = (
        f"{'tool':<9} {'runs':>4} {'wall s':>8} {'lines/s (wall)':>15} {'user s':>8} {'sys s':>7} "
        f"{'lines/s (CPU)':>14} {'peak RSS MB':>12} {'exit':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.tool:<9} {len(r.runs):>4} {r.wall:>8.3f} {rate(lines, r.wall):>15} {r.user:>8.3f} "
            f"{r.sys:>7.3f} {rate(lines, r.cpu):>14} {r.maxrss_mb:>12.1f} {r.returncode:>5}"
        )


def goal_line(text: str, passed: bool | None, detail: str) -> str:
    mark = {True: "PASS", False: "FAIL", None: "n/a "}[passed]
    return f"  {mark}  {text:<44} {detail}"


def report_replay_missing(cmd: Sequence[str], run: Run) -> None:
    print("watchdog replay gave no verdict, so it is left out of the table:")
    print("  " + " ".join(cmd) + f"  -> exit {run.returncode}")
    for line in run.stderr.decode(errors="replace").strip().splitlines()[-3:]:
        print(f"  | {line}")
    print()


def report_answers(replay: dict[str, Any] | None, mtail: Result | None) -> None:
    """What each tool concluded, so a fast wrong answer does not pass unnoticed."""
    if replay is not None:
        print(
            f"\nwatchdog verdict: state={replay.get('state')} phase={replay.get('phase')} "
            f"lines_read={replay.get('lines_read')} error={(replay.get('error') or {}).get('summary')}"
        )
    if mtail is not None:
        values = mtail_values(mtail.runs[-1])
        print(
            f"mtail answers: lines={values.get('watchdog_log_lines_total')} "
            f"ready={values.get('watchdog_ready_total')} "
            f"tracebacks={values.get('watchdog_tracebacks_total')} "
            f"exceptions={values.get('watchdog_exception_lines_total')} "
            f"avail_mem_after_weights_gb={values.get('watchdog_avail_mem_after_weights_gb')}"
        )


def report_goals(
    lines: int, replay: Result | None, mtail: Result | None, rss: Run | None, rss_gb: float | None
) -> list[bool]:
    """Print each goal with PASS, FAIL or n/a; return the outcomes of the measured ones."""
    print("\ngoals:")
    checks: list[bool] = []
    text = f"replay >= {GOAL_LINES_PER_SECOND:,} lines/s on one core"
    if replay is not None:
        speed = lines / replay.wall
        checks.append(speed >= GOAL_LINES_PER_SECOND)
        print(goal_line(text, checks[-1], f"{speed:,.0f} lines/s (wall, process start included)"))
    else:
        print(goal_line(text, None, "replay not measured"))
    text = f"replay >= {GOAL_RATIO_OVER_MTAIL:g}x mtail's lines/s"
    if replay is not None and mtail is not None:
        wall_ratio = mtail.wall / replay.wall
        cpu_ratio = mtail.cpu / replay.cpu
        checks.append(wall_ratio >= GOAL_RATIO_OVER_MTAIL)
        print(goal_line(text, checks[-1], f"{wall_ratio:.1f}x (wall), {cpu_ratio:.1f}x (CPU)"))
    else:
        print(goal_line(text, None, "needs both tools"))
    text = f"a {rss_gb or 1:g} GB log replays in < {GOAL_RSS_MB:g} MB RSS"
    if rss is not None:
        checks.append(rss.maxrss_mb < GOAL_RSS_MB and rss.returncode in VERDICT_EXIT_CODES)
        print(goal_line(text, checks[-1], f"{rss.maxrss_mb:.1f} MB"))
    else:
        print(goal_line(text, None, "use --rss-gb 1" if replay is not None else "replay not measured"))
    return checks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, help="an existing log to replay (default: generate one)")
    parser.add_argument("--lines", type=int, default=1_000_000, help="decode lines of the generated log")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool; the best is reported (default 3)")
    parser.add_argument(
        "--workdir", type=Path, help="keep and reuse generated logs here (default: a temp dir)"
    )
    parser.add_argument("--regenerate", action="store_true", help="regenerate logs found in --workdir")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs `-m watchdog.cli`")
    parser.add_argument("--mtail", default="mtail", help="the mtail binary (default: from PATH)")
    parser.add_argument("--no-mtail", action="store_true", help="time the watchdog only")
    parser.add_argument("--all-cpus", action="store_true", help="do not pin the tools to one CPU")
    parser.add_argument("--rss-gb", type=float, help="also replay a log of this many GB and report peak RSS")
    parser.add_argument("--check", action="store_true", help="exit 1 when a measured goal is missed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mtail_path = None if args.no_mtail else shutil.which(args.mtail)
    if not args.no_mtail and mtail_path is None:
        print(
            f"mtail not found ({args.mtail!r}): install it (Debian: apt-get install mtail) or pass --no-mtail"
        )
        return 2
    cpu = None if args.all_cpus else pin_to_one_cpu()

    with workspace(args.workdir) as workdir:
        log = args.log or ensure_log(
            workdir, f"sglang-{args.lines}.log", ["--lines", str(args.lines)], regenerate=args.regenerate
        )
        lines = count_lines(log)
        where = f"pinned to CPU {cpu}" if cpu is not None else "all CPUs"
        size_mb = log.stat().st_size / 1e6
        print(f"log: {log}  {lines:,} lines  {size_mb:,.1f} MB  ({where}, best of {args.runs})")
        floor = run_once(["true"]).maxrss_mb
        print(f"peak RSS cannot read below the launcher's own image, {floor:.1f} MB\n")

        cmd = watchdog_cmd(args.python, log)
        replay: Result | None = best_of("watchdog", cmd, args.runs)
        answer = verdict(replay.runs[-1]) if replay else None
        if replay is not None and answer is None:
            report_replay_missing(cmd, replay.runs[-1])
            replay = None
        mtail = best_of("mtail", mtail_cmd(mtail_path, log), args.runs) if mtail_path else None
        print_table(lines, [r for r in (replay, mtail) if r is not None])
        report_answers(answer, mtail)

        rss: Run | None = None
        if args.rss_gb and replay is not None:
            big = ensure_log(
                workdir,
                f"sglang-{args.rss_gb:g}gb.log",
                ["--size-gb", str(args.rss_gb)],
                regenerate=args.regenerate,
            )
            big_lines = count_lines(big)
            rss = run_once(watchdog_cmd(args.python, big))
            print(
                f"\n{args.rss_gb:g} GB log: {big_lines:,} lines, replay {rss.wall:.1f} s "
                f"({rate(big_lines, rss.wall)} lines/s), exit {rss.returncode}"
            )

    checks = report_goals(lines, replay, mtail, rss, args.rss_gb)
    return 1 if args.check and not all(checks) else 0


if __name__ == "__main__":
    sys.exit(main())
