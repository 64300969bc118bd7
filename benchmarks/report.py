"""Run the benchmarks and print (or write into docs/benchmarks.md) one table: each figure beside its anchor.

    python benchmarks/report.py [--quick] [--only NAME ...] [--write]

Each benchmark script runs as a subprocess, exactly as its docstring shows, and its printed output is parsed
here with regular expressions (the scripts stay the source of truth for what they measure). Figures a script
does not print are measured here: `grep -c -E` over the same log as the floor of reading it at all, and the
`sleep N && ssh host tail` habit's latency, which is arithmetic. Each row: what, watchdog's figure, the
anchor's figure, the goal, met or not, and the command that reproduces it.

`--quick` runs every benchmark at a small size (under a minute on two cores); `--only` picks benchmarks by
name; `--write` replaces the block between the BEGIN and END markers in docs/benchmarks.md (and nothing else).
A machine that lends a few minutes per command (the quiet `device` machine) runs the table in parts:
`--only A B --part-out FILE` saves a part's rows, where and when it ran; `--write-from FILE ...` then writes
the block of several parts, in the order given, without running anything.
The machine is shared: wall-clock figures are noisy, CPU-time figures (where a script gives them) less so.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOC = REPO / "docs" / "benchmarks.md"
BEGIN = "<!-- BEGIN GENERATED: python benchmarks/report.py --write -->"
END = "<!-- END GENERATED -->"

Figures = dict[str, float]

# The habit the watchdog replaces: launch, `sleep 660 && ssh host tail -20 server.log`, read. A crash at a
# uniformly random moment of the sleep is seen when the sleep ends: 330 s later on average, 660 s at worst.
HABIT_SLEEP_S = 660.0
# Polling a log with `while sleep 1; do ssh host tail ...; done`: a line waits 0.5 s on average, 1 s at worst.
POLL_SLEEP_S = 1.0
# The shard goal: a launch moves with probability 1/(n+1) when n shards become n+1, within this many points.
SHARD_TOLERANCE_POINTS = 3.0

# The markers benchmarks/watchdog.mtail counts, as one POSIX extended regex: grep counts the lines that hold
# any of them, the least work a tool that reads the log for these markers can do.
GREP_MARKERS = "|".join(
    (
        r"Load weight begin\.",
        r"Load weight end\..*avail mem=[0-9]+\.[0-9]+ GB",
        r"KV Cache is allocated\.",
        r"Capture cuda graph begin\.",
        r"Capture cuda graph end\.",
        r"The server is fired up and ready to roll!",
        r"Loading safetensors checkpoint shards:[[:space:]]+[0-9]+% Completed [|] [0-9]+/[0-9]+",
        r"Traceback \(most recent call last\):",
        r"^[[:alnum:]_]+(Error|Exception): ",
        r"Not enough memory",
    )
)


class ParseError(ValueError):
    """A script's output lacks a figure the report needs (its format changed, or it failed midway)."""

    def __init__(self, script: str, what: str) -> None:
        super().__init__(f"{script}: no {what} in its output; has its format changed? Run it by hand.")
        self.script, self.what = script, what


class BenchmarkFailed(RuntimeError):
    """A benchmark exited with an error or timed out."""


class MarkersMissing(ValueError):
    """The document has no generated block to replace."""


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    what: str
    watchdog: str
    anchor: str
    goal: str
    met: bool | None  # None: no goal, or nothing to judge it on
    command: str


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark runs: the defaults of the scripts, or small for --quick."""

    log_lines: int
    runs: int
    verdict_runs: int
    ssh_lines: int
    remote: tuple[str, ...]
    daemon: tuple[str, ...]
    daemon_ssh: tuple[str, ...]
    daemon_scale: tuple[str, ...]
    alert: tuple[str, ...]
    shard: tuple[str, ...]
    local: tuple[str, ...]
    timeout: float


FULL = Sizes(
    log_lines=1_000_000,
    runs=3,
    verdict_runs=30,
    ssh_lines=200,
    remote=(),
    daemon=("--local",),
    # over SSH, the remote side (sshd's sessions, each log's tails: on the GPU hosts in a deployment) runs on
    # this machine too: the daemon gets CPU 0 to itself, and they the other CPUs
    daemon_ssh=("--pin",),
    # one daemon at scale (issue 31): 2,000 launches over SSH, at the same 10 lines/s each; without the 2,000
    # `tail -F` beside it (their wake-ups, 20,000 a second, are no part of a deployment's daemon host)
    daemon_scale=(
        "--pin",
        "--launches",
        "2000",
        "--hosts",
        "20",
        "--seconds",
        "30",
        "--quiet-seconds",
        "5",
        "--no-anchor",
    ),
    # the 200 others as local files: over SSH, their 200 sshd sessions and remote `tail`s (which live on the
    # GPU hosts in a deployment) would share this machine's 2 cores with the daemon being measured
    alert=("--crashes", "20", "--others", "200", "--local-others"),
    shard=("--launches", "2000", "--max-shards", "8"),
    local=("--runs", "3", "--logs", "40"),
    timeout=1800.0,
)
QUICK = Sizes(
    log_lines=100_000,
    runs=2,
    verdict_runs=5,
    ssh_lines=50,
    remote=("--logs", "10", "--seconds", "3"),
    daemon=("--local", "--launches", "20", "--seconds", "10", "--quiet-seconds", "5", "--quiet-lead", "5"),
    daemon_ssh=(
        "--pin",
        "--launches",
        "20",
        "--hosts",
        "2",
        "--seconds",
        "10",
        "--quiet-seconds",
        "5",
        "--quiet-lead",
        "5",
    ),
    daemon_scale=("--pin", "--launches", "1000", "--hosts", "2", "--seconds", "5", "--quiet-seconds", "3"),
    alert=("--crashes", "5", "--others", "20", "--local-others"),
    shard=("--launches", "2000", "--max-shards", "8"),
    local=("--runs", "1", "--logs", "10"),
    timeout=600.0,
)


# -- parsers: a script's printed output -> its figures -----------------------------------------------------

_NUMBER = r"-?[\d,]*\.?\d+"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _search(pattern: str, text: str, script: str, what: str) -> re.Match[str]:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise ParseError(script, what)
    return match


def parse_replay(text: str) -> Figures:
    """replay_bench.py: log lines, each tool's wall/user/sys seconds and peak RSS (by the header's names)."""
    script = "replay_bench.py"
    figures = {"lines": _num(_search(rf"^log: .*?\s({_NUMBER}) lines", text, script, "log line count")[1])}
    header = _search(r"^tool\s.*$", text, script, "table header")[0]
    columns = re.split(r"\s{2,}", header.strip())
    wanted = {"wall s": "wall", "user s": "user", "sys s": "sys", "peak RSS MB": "rss_mb", "exit": "exit"}
    for tool in ("watchdog", "mtail"):
        row = re.search(rf"^{tool}\s+(.*)$", text, re.MULTILINE)
        if row is None:
            continue  # mtail absent (--no-mtail) or replay gave no verdict: the report says so
        values = dict(zip(columns[1:], row[1].split(), strict=False))
        for name, key in wanted.items():
            if name not in values:
                raise ParseError(script, f"{name!r} column for {tool}")
            figures[f"{tool}.{key}"] = _num(values[name])
    if "watchdog.wall" not in figures:
        raise ParseError(script, "watchdog row")
    state = re.search(r"^watchdog verdict: state=(\w+)", text, re.MULTILINE)
    figures["watchdog.crashed"] = float(state is not None and state[1] == "crashed")
    return figures


def parse_grep_count(text: str) -> int:
    """`grep -c`: the count of matching lines."""
    return int(_search(r"^(\d+)\s*$", text, "grep -c", "line count")[1])


def parse_verdict(text: str) -> dict[str, dict[str, float | str]]:
    """verdict_latency.py: per "case measure" (e.g. "fatal transition"): runs, p50, p99, max, goal, met."""
    rows: dict[str, dict[str, float | str]] = {}
    pattern = rf"^(\w+)\s+(transition|webhook)\s+(\d+)\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(.*?):\s*(met|MISSED)\s*$"
    for m in re.finditer(pattern, text, re.MULTILINE):
        rows[f"{m[1]} {m[2]}"] = {
            "runs": float(m[3]),
            "p50": _num(m[4]),
            "p99": _num(m[5]),
            "max": _num(m[6]),
            "goal": m[7].strip(),
            "met": m[8],
        }
    if not any(k.endswith("transition") for k in rows) or not any(k.endswith("webhook") for k in rows):
        raise ParseError("verdict_latency.py", "transition and webhook rows")
    return rows


def parse_ssh(text: str) -> Figures:
    """ssh_latency.py: lines, p50, p99 and max in ms."""
    m = _search(
        rf"lines=(\d+) p50=({_NUMBER}) ms p99=({_NUMBER}) ms max=({_NUMBER}) ms",
        text,
        "ssh_latency.py",
        "p50/p99",
    )
    return {"lines": float(m[1]), "p50": _num(m[2]), "p99": _num(m[3]), "max": _num(m[4])}


@dataclass(frozen=True)
class DaemonFigures:
    """daemon_bench.py's figures: the run's context, and each goal row as (measured, bound, unit) by name."""

    mode: str
    context: Figures
    goals: dict[str, tuple[float, float, str]]


def parse_daemon(text: str) -> DaemonFigures:
    """daemon_bench.py: launches, load, crashes judged, p50/max, and every "what measured <= bound" row."""
    script = "daemon_bench.py"
    head = _search(r"^watchdog run: (\d+) launches, ([^;]+);", text, script, "launch count")
    load = _search(rf"load \(({_NUMBER}),", text, script, "load average")
    judged = _search(r"(\d+) crashes in the window judged, (\d+) not", text, script, "crashes judged")
    p50 = _search(rf"line-to-verdict p50, max\s+({_NUMBER}), ({_NUMBER})", text, script, "p50, max")
    context: Figures = {
        "launches": float(head[1]),
        "load": _num(load[1]),
        "judged": float(judged[1]),
        "missed": float(judged[2]),
        "p50": _num(p50[1]),
        "max": _num(p50[2]),
    }
    goals: dict[str, tuple[float, float, str]] = {}
    pattern = rf"^\s+(\S.*?)\s+({_NUMBER})\s+<=\s*({_NUMBER}) (.*?)\s+(?:met|MISSED)\s*$"
    for m in re.finditer(pattern, text, re.MULTILINE):
        goals[m[1]] = (_num(m[2]), _num(m[3]), m[4].strip())
    # daemon_bench.py's goals: GOALS below SCALE_LAUNCHES launches, GOALS_AT_SCALE from there on
    at_scale = float(head[1]) >= 1000
    required = ("CPU, logs growing", "line-to-verdict max")
    for what in required if at_scale else ("CPU, logs growing", "peak RSS", "line-to-verdict p99"):
        if what not in goals:
            raise ParseError(script, f"{what!r} goal row")
    anchor = re.search(
        rf"anchor: tail -F of each log \((\d+) processes\): ({_NUMBER}) % of a core under load, ({_NUMBER}) % quiet",
        text,
    )
    if anchor is not None:
        context.update(tails=float(anchor[1]), tail_load=_num(anchor[2]), tail_quiet=_num(anchor[3]))
    pinned = ", the daemon on a CPU of its own" if "the daemon pinned to CPU 0" in text else ""
    return DaemonFigures(head[2].strip() + pinned, context, goals)


def parse_remote(text: str) -> Figures:
    """remote_bench.py: logs, and the CPU % of a core per log of watchdog's reader and of each anchor."""
    script = "remote_bench.py"
    head = _search(r"the remote side: (\d+) logs", text, script, "header")
    figures: Figures = {"logs": float(head[1])}
    for key, what in (
        ("watchdog", "watchdog's stream script"),
        ("tail_f", "anchor: tail -f LOG"),
        ("tail_F", "anchor: tail -F LOG"),
    ):
        m = _search(rf"^\s+{re.escape(what)}\s+({_NUMBER}) % of a core", text, script, what)
        figures[key] = _num(m[1])
    return figures


def parse_alert(text: str) -> Figures:
    """alert_latency.py: crashes, other launches, p50/p99/max ms, the goal's bound and the daemon's CPU %."""
    script = "alert_latency.py"
    head = _search(
        r"crash line -> webhook, (\d+) crashes, (\d+) other launches \((\w+)", text, script, "header"
    )
    m = _search(rf"p50 ({_NUMBER}) ms\s+p99 ({_NUMBER}) ms\s+max ({_NUMBER}) ms", text, script, "p50/p99")
    goal = _search(
        rf"goal p99 <= settle ({_NUMBER}) ms \+ ({_NUMBER}) = ({_NUMBER}) ms", text, script, "goal"
    )
    cpu = _search(rf"CPU ({_NUMBER})% of one core", text, script, "CPU")
    return {
        "crashes": float(head[1]),
        "others": float(head[2]),
        "local": float(head[3] == "local"),
        "p50": _num(m[1]),
        "p99": _num(m[2]),
        "max": _num(m[3]),
        "settle": _num(goal[1]),
        "goal": _num(goal[3]),
        "cpu": _num(cpu[1]),
    }


def parse_resume(text: str) -> Figures:
    """resume_bench.py: seconds and bytes read from the start and from the checkpoint, and bytes appended."""
    script = "resume_bench.py"
    start = _search(
        rf"from the start:\s+({_NUMBER}) s\s+({_NUMBER}) bytes read", text, script, "from the start"
    )
    resumed = _search(
        rf"from the checkpoint:\s+({_NUMBER}) s\s+({_NUMBER}) bytes read \(resumed at ({_NUMBER}); ({_NUMBER}) appended",
        text,
        script,
        "from the checkpoint",
    )
    saved = _search(rf"checkpoint saved:\s+({_NUMBER}) bytes", text, script, "checkpoint size")
    return {
        "start_s": _num(start[1]),
        "start_bytes": _num(start[2]),
        "resume_s": _num(resumed[1]),
        "resume_bytes": _num(resumed[2]),
        "resumed_at": _num(resumed[3]),
        "appended": _num(resumed[4]),
        "checkpoint_bytes": _num(saved[1]),
    }


def parse_shard(text: str) -> dict[int, Figures]:
    """shard_sim.py: per shard count n, launches moved when n -> n+1 (rendezvous, ideal, modulo)."""
    total = _num(_search(r"^(\d+) launches;", text, "shard_sim.py", "launch count")[1])
    rows: dict[int, Figures] = {}
    pattern = r"^\| (\d+) \|.*\| (\d+) \([\d.]+%\) \| (\d+) \([\d.]+%\) \| (\d+) \([\d.]+%\) \|\s*$"
    for m in re.finditer(pattern, text, re.MULTILINE):
        rows[int(m[1])] = {
            "launches": total,
            "moved": float(m[2]),
            "ideal": float(m[3]),
            "modulo": float(m[4]),
        }
    if not rows:
        raise ParseError("shard_sim.py", "table rows")
    return rows


def parse_local(text: str) -> dict[str, Figures]:
    """local_verdict.py: per command, the wall and CPU milliseconds at p50 and p90."""
    out = {
        m[1].strip(): {
            "wall": float(m[2]),
            "wall_p90": float(m[3]),
            "cpu": float(m[4]),
            "cpu_p90": float(m[5]),
        }
        for m in re.finditer(
            r"^(\S.*?)\s+wall p50 (\d+) ms p90 (\d+) ms; cpu p50 (\d+) ms p90 (\d+) ms$", text, re.MULTILINE
        )
    }
    for name in ("watch", "replay", "python3 -c pass", "tail -n 20"):
        if name not in out:
            raise ParseError("local_verdict.py", f"{name} line")
    return out


def parse_corpus(text: str) -> Figures:
    """corpus_score.py: labelled logs, logs right on every field, and per field the share right (0..1), of its
    first section (the corpus; the held-out section after it is reported apart)."""
    text = text.split("\n== held out", 1)[0]
    m = _search(r"^(\d+) labelled logs; (\d+) right on every field", text, "corpus_score.py", "summary")
    figures = {"logs": float(m[1]), "right": float(m[2])}
    for f in re.finditer(r"^\s+(\w+)\s+(\d+)/(\d+)\s", text, re.MULTILINE):
        figures[f[1]] = int(f[2]) / int(f[3]) if int(f[3]) else 1.0
    return figures


# -- running ---------------------------------------------------------------------------------------------


@dataclass
class Context:
    """What the benchmarks share: sizes, a scratch directory, the generated log."""

    sizes: Sizes
    tmp: Path
    python: str = sys.executable
    outputs: Path | None = None  # keep each script's output here, as NN-SCRIPT.txt
    _log: Path | None = None
    notes: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        # the scripts' own mkdtemp() dirs (resume_bench, daemon_bench) land in our scratch dir and go with it
        return {**os.environ, "TMPDIR": str(self.tmp), "PYTHONUNBUFFERED": "1"}

    def script(self, name: str, *args: str) -> str:
        """Run benchmarks/NAME with args; return its standard output (raise BenchmarkFailed on an error)."""
        cmd = [self.python, str(HERE / name), *args]
        print(f"  $ {shown(name, args, self)}", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(
                cmd,
                cwd=REPO,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=self.sizes.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchmarkFailed(f"{name} timed out after {self.sizes.timeout:.0f} s") from exc
        if done.returncode != 0:
            tail = " / ".join(done.stderr.strip().splitlines()[-3:])
            raise BenchmarkFailed(f"{name} exited {done.returncode}: {tail}")
        if self.outputs is not None:
            self.outputs.mkdir(parents=True, exist_ok=True)
            kept = len(list(self.outputs.glob("*.txt")))
            (self.outputs / f"{kept:02d}-{Path(name).stem}.txt").write_text(done.stdout)
        return done.stdout

    def log(self) -> Path:
        """The verbose log of the replay and resume benchmarks, generated once."""
        if self._log is None:
            path = self.tmp / f"sglang-{self.sizes.log_lines}.log"
            self.script("gen_verbose_log.py", "--lines", str(self.sizes.log_lines), "--out", str(path))
            self._log = path
        return self._log


def shown(name: str, args: Sequence[str], ctx: Context | None = None) -> str:
    """The command as a reader runs it from the repository root (the generated log shown as LOG)."""
    log = str(ctx._log) if ctx is not None and ctx._log is not None else None
    words = [("LOG" if a == log or (ctx is not None and a.startswith(str(ctx.tmp))) else a) for a in args]
    return " ".join(["python", f"benchmarks/{name}", *words])


@contextlib.contextmanager
def pinned_to_one_cpu() -> Iterator[None]:
    """Pin this process (so the children it starts) to one CPU, as replay_bench.py pins its tools."""
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {max(before)})
    except (AttributeError, OSError):
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def time_grep(log: Path, runs: int) -> tuple[float, float, int]:
    """Best wall and CPU seconds of `grep -c -E GREP_MARKERS LOG` over `runs`, and its count."""
    walls, cpus, count = [], [], 0
    with pinned_to_one_cpu():
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                ["grep", "-c", "-E", GREP_MARKERS, str(log)],
                capture_output=True,
                text=True,
                env={**os.environ, "LC_ALL": "C"},
                check=False,
            )
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode > 1:  # 1 is "no line matched"
                raise BenchmarkFailed(f"grep exited {done.returncode}: {done.stderr.strip()}")
            count = parse_grep_count(done.stdout)
    return min(walls), min(cpus), count


# -- rows: figures -> the table ----------------------------------------------------------------------------


def _rate(lines: float, seconds: float) -> str:
    return f"{lines / seconds:,.0f}" if seconds > 0 else "-"


def _x(ratio: float) -> str:
    return f"{ratio:,.1f}x" if ratio < 100 else f"{ratio:,.0f}x"


def replay_rows(f: Figures, grep: tuple[float, float, int] | None, cmd: str, grep_cmd: str) -> list[Row]:
    """Replay against mtail (the goal: 10x) and against grep -c (the floor), in lines/s on the same log."""
    lines = f["lines"]
    wall, cpu = f["watchdog.wall"], f["watchdog.user"] + f["watchdog.sys"]
    verdict = "right verdict (crashed)" if f["watchdog.crashed"] else "**wrong or no verdict**"
    ours = f"{_rate(lines, wall)} lines/s wall, {_rate(lines, cpu)} per CPU s; "
    ours += f"{f['watchdog.rss_mb']:.0f} MB RSS; {verdict}"
    rows = []
    if "mtail.wall" in f:
        m_wall, m_cpu = f["mtail.wall"], f["mtail.user"] + f["mtail.sys"]
        ratio = m_wall / wall
        anchor = (
            f"`mtail --one_shot`: {_rate(lines, m_wall)} lines/s wall, {_rate(lines, m_cpu)} per CPU s "
            f"(watchdog {_x(ratio)} wall, {_x(m_cpu / cpu)} CPU)"
        )
        rows.append(
            Row("replay vs mtail, same log and questions", ours, anchor, ">= 10x mtail", ratio >= 10, cmd)
        )
    else:
        rows.append(
            Row(
                "replay vs mtail, same log and questions",
                ours,
                "mtail not installed",
                ">= 10x mtail",
                None,
                cmd,
            )
        )
    if grep is not None:
        g_wall, g_cpu, count = grep
        anchor = (
            f"`grep -c -E` of the markers ({count:,} lines): {_rate(lines, g_wall)} lines/s wall, "
            f"{_rate(lines, g_cpu)} per CPU s (watchdog takes {_x(wall / g_wall)} its wall time)"
        )
        speed = lines / wall
        rows.append(
            Row(
                f"replay throughput, {lines:,.0f} lines, process start included",
                f"{speed:,.0f} lines/s wall ({_rate(lines, cpu)} per CPU s)",
                anchor,
                ">= 1,000,000 lines/s on one core",
                speed >= 1_000_000,
                grep_cmd,
            )
        )
    return rows


def verdict_rows(rows: dict[str, dict[str, float | str]], cmd: str) -> list[Row]:
    """Crash line -> verdict, and -> webhook, beside the `sleep 660 && ssh host tail` habit."""
    mean, worst = HABIT_SLEEP_S / 2, HABIT_SLEEP_S
    out = []
    for measure, what in (
        ("transition", "crash line on an SSH host -> `crashed` verdict (`watchdog watch`)"),
        ("webhook", "crash line on an SSH host -> webhook received (`watchdog watch --notify`)"),
    ):
        picked = {k.split()[0]: v for k, v in rows.items() if k.endswith(measure)}
        cells = "; ".join(
            f"{case}: p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms ({v['runs']:.0f} runs)"
            for case, v in picked.items()
        )
        slowest = max(float(v["p50"]) for v in picked.values())
        anchor = (
            f"`sleep {HABIT_SLEEP_S:.0f} && ssh host tail -20 server.log`: {mean:.0f} s mean, {worst:.0f} s worst "
            f"(watchdog p50 {_x(mean * 1000 / slowest)} sooner)"
        )
        goal = str(next(iter(picked.values()))["goal"]) + " ms"
        met = all(v["met"] == "met" for v in picked.values())
        out.append(Row(what, cells, anchor, goal, met, cmd))
    return out


def ssh_row(f: Figures, cmd: str) -> Row:
    """An appended line -> the SSH follower yields it, beside a `sleep 1` polling loop."""
    mean = POLL_SLEEP_S * 1000 / 2
    return Row(
        "line appended on an SSH host -> read by the follower",
        f"p50 {f['p50']:.1f} ms, p99 {f['p99']:.1f} ms, max {f['max']:.1f} ms ({f['lines']:.0f} lines)",
        f"`while sleep {POLL_SLEEP_S:g}; do ssh host tail ...; done`: {mean:.0f} ms mean, "
        f"{POLL_SLEEP_S * 1000:.0f} ms worst, plus an SSH connect per poll (watchdog p50 {_x(mean / f['p50'])} sooner)",
        "p50 <= 20 ms, p99 <= 50 ms",
        f["p50"] <= 20 and f["p99"] <= 50,
        cmd,
    )


def daemon_rows(parsed: DaemonFigures, cmd: str) -> list[Row]:
    """The daemon's CPU, peak RSS, line-to-verdict p99 (and quiet CPU) at N launches, beside the goals."""
    ctx = parsed.context
    where = f"{ctx['launches']:.0f} launches, {parsed.mode}"
    out = []
    for what, (value, bound, unit) in parsed.goals.items():
        cell = f"{value:.1f} {unit}"
        if what.startswith("line-to-verdict"):
            cell += f" (p50 {ctx['p50']:g}, max {ctx['max']:g}; {ctx['judged']:.0f} crashes, {ctx['missed']:.0f} missed)"
        anchor = "—"
        if what.startswith("CPU"):
            cell += f" (load average {ctx['load']:.1f} at the end)"
            if "tails" in ctx:  # the same run's `tail -F` of each log, in the same window
                tails = ctx["tail_quiet" if "quiet" in what else "tail_load"]
                anchor = f"`tail -F` of each of the {ctx['tails']:.0f} logs: {tails:.3f} % of a core in all"
        out.append(Row(f"daemon: {what}, {where}", cell, anchor, f"<= {bound:g} {unit}", value <= bound, cmd))
    return out


def remote_row(f: Figures, cmd: str) -> Row:
    """The GPU host's CPU per followed log: watchdog's reader beside `tail -f` and `tail -F`."""
    return Row(
        f"GPU host: CPU per followed log growing 10 lines/s ({f['logs']:.0f} logs; the reader only, not SSH)",
        f"{f['watchdog']:.3f} % of a core",
        f"`tail -f LOG` {f['tail_f']:.3f} %, `tail -F LOG` {f['tail_F']:.3f} %",
        "—",
        None,
        cmd,
    )


def alert_row(f: Figures, cmd: str) -> Row:
    """Crash line -> chat webhook through the daemon, beside the settle window it waits by design."""
    others = f"{f['others']:.0f} other launches {'local' if f['local'] else 'over SSH'}"
    return Row(
        f"daemon: crash line -> chat webhook, {f['crashes']:.0f} crashes, {others}, a hanging second notifier",
        f"p99 {f['p99']:g} ms (p50 {f['p50']:g}, max {f['max']:g}); daemon CPU {f['cpu']:g} % of a core",
        f"the settle window alone: {f['settle']:g} ms (it ends early after 50 ms of quiet)",
        f"p99 <= {f['goal']:g} ms (settle + 50)",
        f["p99"] <= f["goal"],
        cmd,
    )


def resume_row(f: Figures, cmd: str) -> Row:
    """Catching up from the checkpoint vs from the start of the same log."""
    return Row(
        f"follow a {f['start_bytes'] / 1e6:,.0f} MB log again after a restart (local)",
        f"from the checkpoint: {f['resume_s']:.3f} s, {f['resume_bytes']:,.0f} bytes read "
        f"(checkpoint {f['checkpoint_bytes']:,.0f} bytes)",
        f"from the start: {f['start_s']:.3f} s, {f['start_bytes']:,.0f} bytes read "
        f"(watchdog {_x(f['start_s'] / max(f['resume_s'], 1e-6))} sooner)",
        f"reads only the {f['appended']:,.0f} bytes appended",
        f["resume_bytes"] <= f["appended"],
        cmd,
    )


def shard_row(rows: dict[int, Figures], cmd: str) -> Row:
    """Launches moved when n shards become n+1: rendezvous hashing beside a modulo hash."""
    last = max(rows)
    f = rows[last]
    launches = f["launches"]
    off = max(abs(r["moved"] - r["ideal"]) / launches * 100 for r in rows.values())
    return Row(
        f"launches moved when {last} shards become {last + 1} ({launches:,.0f} launches)",
        f"rendezvous: {f['moved'] / launches:.1%} (ideal {f['ideal'] / launches:.1%}); "
        f"n = {min(rows)}..{last}: at most {off:.1f} points off the ideal",
        f"modulo `blake2b(name) % n`: {f['modulo'] / launches:.1%}",
        f"each n: within {SHARD_TOLERANCE_POINTS:g} points of 1/(n+1)",
        off <= SHARD_TOLERANCE_POINTS,
        cmd,
    )


def local_row(f: dict[str, Figures], cmd: str) -> Row:
    """A complete local crash log's verdict: all start-up and reading."""
    watch, replay = f["watch"], f["replay"]
    return Row(
        "complete local crash log -> verdict, one command at a time",
        f"`watch --json`: wall p50 {watch['wall']:.0f} ms, p90 {watch['wall_p90']:.0f} ms, CPU p50 "
        f"{watch['cpu']:.0f} ms; `replay --json`: wall p50 {replay['wall']:.0f} ms, CPU p50 {replay['cpu']:.0f} ms",
        f"`python3 -c pass`: {f['python3 -c pass']['wall']:.0f} ms; `tail -n 20 LOG`: {f['tail -n 20']['wall']:.0f} ms",
        "watch p50 <= 500 ms",
        watch["wall"] <= 500,
        cmd,
    )


def corpus_row(f: Figures, cmd: str) -> Row:
    """Replay's verdicts on the labelled real logs."""
    fields = ", ".join(f"{k} {v:.0%}" for k, v in f.items() if k not in ("logs", "right"))
    return Row(
        "replay verdicts on labelled real logs",
        f"{f['right']:.0f}/{f['logs']:.0f} right on every field ({fields})",
        "—",
        "—",
        None,
        cmd,
    )


# -- the benchmarks ----------------------------------------------------------------------------------------


def bench_replay(ctx: Context) -> list[Row]:
    log = ctx.log()
    runs = str(ctx.sizes.runs)
    args = ["--log", str(log), "--runs", runs]
    if shutil.which("mtail") is None:
        args.append("--no-mtail")
    figures = parse_replay(ctx.script("replay_bench.py", *args))
    grep = time_grep(log, ctx.sizes.runs)
    ctx.notes.append(
        f"LOG: `python benchmarks/gen_verbose_log.py --lines {ctx.sizes.log_lines} --out LOG` "
        f"({figures['lines']:,.0f} lines, {log.stat().st_size / 1e6:,.1f} MB). "
        f"`$MARKERS` (what `benchmarks/watchdog.mtail` counts): `{GREP_MARKERS}`."
    )
    grep_cmd = f'`LC_ALL=C grep -c -E "$MARKERS" LOG`, best of {runs}, pinned to one CPU'
    return replay_rows(figures, grep, f"`{shown('replay_bench.py', args, ctx)}`", grep_cmd)


def bench_verdict(ctx: Context) -> list[Row]:
    args = ("--runs", str(ctx.sizes.verdict_runs))
    return verdict_rows(
        parse_verdict(ctx.script("verdict_latency.py", *args)), f"`{shown('verdict_latency.py', args)}`"
    )


def bench_ssh(ctx: Context) -> list[Row]:
    args = ("--lines", str(ctx.sizes.ssh_lines))
    return [ssh_row(parse_ssh(ctx.script("ssh_latency.py", *args)), f"`{shown('ssh_latency.py', args)}`")]


def bench_remote(ctx: Context) -> list[Row]:
    args = ctx.sizes.remote
    return [
        remote_row(parse_remote(ctx.script("remote_bench.py", *args)), f"`{shown('remote_bench.py', args)}`")
    ]


def _daemon_run(ctx: Context, args: Sequence[str]) -> list[Row]:
    return daemon_rows(
        parse_daemon(ctx.script("daemon_bench.py", *args)), f"`{shown('daemon_bench.py', args)}`"
    )


def bench_daemon(ctx: Context) -> list[Row]:
    return _daemon_run(ctx, ctx.sizes.daemon)


def bench_daemon_ssh(ctx: Context) -> list[Row]:
    return _daemon_run(ctx, ctx.sizes.daemon_ssh)


def bench_daemon_scale(ctx: Context) -> list[Row]:
    return _daemon_run(ctx, ctx.sizes.daemon_scale)


def bench_alert(ctx: Context) -> list[Row]:
    args = ctx.sizes.alert
    return [
        alert_row(parse_alert(ctx.script("alert_latency.py", *args)), f"`{shown('alert_latency.py', args)}`")
    ]


def bench_resume(ctx: Context) -> list[Row]:
    log = ctx.log()
    out = ctx.script("resume_bench.py", str(log))
    return [resume_row(parse_resume(out), f"`{shown('resume_bench.py', [str(log)], ctx)}`")]


def bench_shard(ctx: Context) -> list[Row]:
    args = ctx.sizes.shard
    return [shard_row(parse_shard(ctx.script("shard_sim.py", *args)), f"`{shown('shard_sim.py', args)}`")]


def bench_corpus(ctx: Context) -> list[Row]:
    return [corpus_row(parse_corpus(ctx.script("corpus_score.py")), f"`{shown('corpus_score.py', [])}`")]


def bench_local(ctx: Context) -> list[Row]:
    args = ctx.sizes.local
    return [
        local_row(parse_local(ctx.script("local_verdict.py", *args)), f"`{shown('local_verdict.py', args)}`")
    ]


BENCHMARKS: dict[str, Callable[[Context], list[Row]]] = {
    "replay": bench_replay,
    "verdict": bench_verdict,
    "ssh": bench_ssh,
    "remote": bench_remote,
    "daemon": bench_daemon,
    "daemon_ssh": bench_daemon_ssh,
    "daemon_scale": bench_daemon_scale,
    "alert": bench_alert,
    "resume": bench_resume,
    "shard": bench_shard,
    "corpus": bench_corpus,
    "local": bench_local,
}


# -- output ------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    # a pipe ends a Markdown table cell, even inside backticks
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(rows: Sequence[Row]) -> str:
    """The Markdown table."""
    lines = ["| what | watchdog | anchor | goal | met | command |", "|---|---|---|---|---|---|"]
    met = {True: "met", False: "**not met**", None: "—"}
    for r in rows:
        cells = (r.what, r.watchdog, r.anchor, r.goal, met[r.met], r.command)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _mtail_version() -> str:
    try:
        done = subprocess.run(["mtail", "--version"], capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    m = re.search(r"mtail version (\S+)", done.stdout + done.stderr)
    return m[1] if m else "unknown"


def _os_name() -> str:
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return platform.system()
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)', text, re.MULTILINE)
    return m[1] if m else platform.system()


def git_commit(repo: Path = REPO) -> str:
    """HEAD's commit and branch, read from .git (no git process), or "unknown"."""
    git = repo / ".git"
    with contextlib.suppress(OSError):
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = (repo / git.read_text(encoding="utf-8").split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head[:12]
        ref = head.removeprefix("ref:").strip()
        branch = ref.removeprefix("refs/heads/")
        for base in (git, common):
            if (base / ref).is_file():
                return f"{(base / ref).read_text(encoding='utf-8').strip()[:12]} ({branch})"
        for line in (common / "packed-refs").read_text(encoding="utf-8").splitlines():
            if line.endswith(" " + ref):
                return f"{line.split()[0][:12]} ({branch})"
    return "unknown"


def calibration() -> float:
    """CPU seconds of `sum(i*i for i in range(10**7))`, best of 3: how fast this host runs Python. The quiet
    machine is whichever host the device tool lends, and they differ by up to 2.4x (0.52 to 1.24 s): CPU shares
    measured on two hosts compare only through it."""
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        sum(i * i for i in range(10**7))
        best = min(best, time.process_time() - start)
    return best


def machine() -> str:
    """Where and when: date, CPUs, the host's calibration, OS, Python, mtail, commit."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}; {len(os.sched_getaffinity(0))} CPUs (nproc), {platform.machine()}, {_os_name()}; "
        f"calibration {calibration():.2f} s of CPU (`sum(i*i for i in range(10**7))`; a slower host, more); "
        f"Python {platform.python_version()}; mtail {_mtail_version()}; commit {git_commit()} "
        f"(the working tree runs, uncommitted edits included)"
    )


def _load_text(load: Sequence[float]) -> str:
    return f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"


def render_block(
    rows: Sequence[Row],
    *,
    where: str,
    command: str,
    took: float,
    notes: Sequence[str],
    load: Sequence[float] | None = None,
) -> str:
    """The generated block: how it was made, the table and its notes (without the markers)."""
    parts = [
        f"Generated by `{command}` ({took:.0f} s): {where}. Load average at the end "
        f"{_load_text(load or os.getloadavg())}: the machine is shared, so wall-clock figures are noisy; "
        "CPU-time figures less so.",
        "",
        render_table(rows),
    ]
    if notes:
        parts += ["", *(f"- {n}" for n in notes)]
    return "\n".join(parts)


def replace_block(doc: str, block: str) -> str:
    """`doc` with the text between the BEGIN and END markers replaced by `block`; the rest is untouched."""
    start = doc.find(BEGIN)
    end = doc.find(END, start + len(BEGIN)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise MarkersMissing(f"no {BEGIN} ... {END} block")
    return doc[: start + len(BEGIN)] + "\n" + block.strip("\n") + "\n" + doc[end:]


@dataclass(frozen=True)
class Part:
    """One run's rows with where, when and how it ran: a part of a table made in several runs."""

    rows: tuple[Row, ...]
    where: str
    command: str
    took: float
    notes: tuple[str, ...]
    load: tuple[float, float, float]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Part:
        d = json.loads(text)
        return cls(
            rows=tuple(Row(**r) for r in d["rows"]),
            where=d["where"],
            command=d["command"],
            took=float(d["took"]),
            notes=tuple(d["notes"]),
            load=(float(d["load"][0]), float(d["load"][1]), float(d["load"][2])),
        )


def render_parts(parts: Sequence[Part]) -> str:
    """The generated block of a table made in several runs: each run's provenance, then one table."""
    if len(parts) == 1:
        p = parts[0]
        return render_block(p.rows, where=p.where, command=p.command, took=p.took, notes=p.notes, load=p.load)
    lines = [f"Generated in {len(parts)} runs, then `python benchmarks/report.py --write-from PART ...`:"]
    lines += [
        f"- `{p.command}` ({p.took:.0f} s): {p.where}. Load average at the end {_load_text(p.load)}."
        for p in parts
    ]
    lines += ["", "The machine may be shared, so wall-clock figures are noisy; CPU-time figures less so.", ""]
    lines.append(render_table([r for p in parts for r in p.rows]))
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines)


def write_doc(path: Path, block: str) -> None:
    """Replace the generated block of the document at `path` (MarkersMissing when it has none)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(replace_block(text, block), encoding="utf-8")


def markers_help(path: Path) -> str:
    """What to insert into the document, and where."""
    return (
        f"{path} has no generated block. Insert these two lines near its top (after the opening paragraph),\n"
        f"then run the command again:\n\n{BEGIN}\n{END}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"benchmarks: {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME", help="run only these")
    parser.add_argument(
        "--write", action="store_true", help=f"replace the generated block of {DOC.relative_to(REPO)}"
    )
    parser.add_argument("--part-out", type=Path, metavar="FILE", help="also save this run's rows as a part")
    parser.add_argument(
        "--write-from",
        type=Path,
        nargs="+",
        metavar="PART",
        help="write the block of these saved parts (in this order) and run nothing",
    )
    parser.add_argument(
        "--outputs", type=Path, metavar="DIR", help="keep each script's own output in this folder"
    )
    parser.add_argument("--doc", type=Path, default=DOC, help=argparse.SUPPRESS)  # the tests write a copy
    args = parser.parse_args(argv)
    if args.write and args.only:
        parser.error("--write regenerates the whole block: run every benchmark (drop --only), or save parts")
    if args.write_from and (args.write or args.only or args.quick or args.part_out):
        parser.error("--write-from runs nothing: it takes no other option")
    if (args.write or args.write_from) and BEGIN not in args.doc.read_text(encoding="utf-8"):
        print(markers_help(args.doc), file=sys.stderr)
        return 2
    if args.write_from:
        try:
            saved = [Part.from_json(p.read_text(encoding="utf-8")) for p in args.write_from]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"report.py: cannot read a part: {exc}", file=sys.stderr)
            return 2
        block = render_parts(saved)
        print(block)
        write_doc(args.doc, block)
        print(f"\nwrote {args.doc}", file=sys.stderr)
        return 0

    command = (
        "python benchmarks/report.py"
        + (" --quick" if args.quick else "")
        + (" --write" if args.write else "")
    )
    if args.only:
        command += " --only " + " ".join(args.only)
    started = time.perf_counter()
    rows: list[Row] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="wd-report-") as tmp:
        ctx = Context(QUICK if args.quick else FULL, Path(tmp), outputs=args.outputs)
        for name in args.only or BENCHMARKS:
            print(f"{name} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                rows += BENCHMARKS[name](ctx)
            except (BenchmarkFailed, ParseError) as exc:
                failed.append(name)
                rows.append(Row(name, f"**failed**: {exc}", "—", "—", None, "—"))
            print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        notes = ctx.notes
    took = time.perf_counter() - started
    if args.quick:
        notes.append(
            "`--quick`: small sizes. Process start-up weighs on a small log's lines/s, a few runs make a noisy p99,"
            " and the daemon's quiet window opens 5 s after the last write (not 15 s), so checkpoint saves may"
            " fall in it; the goals are judged on the full run."
        )
    where = machine()
    block = render_block(rows, where=where, command=command, took=took, notes=notes)
    print(block)
    if args.part_out:
        load = os.getloadavg()
        part = Part(tuple(rows), where, command, took, tuple(notes), (load[0], load[1], load[2]))
        args.part_out.write_text(part.to_json(), encoding="utf-8")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    if args.write:
        write_doc(args.doc, block)
        print(f"\nwrote {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
