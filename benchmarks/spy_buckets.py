"""Where the daemon's CPU goes, by part: py-spy's raw samples of `watchdog run` put in buckets.

Record the daemon while `daemon_bench.py` loads it (its PID is the bench's child running `watchdog.cli`), with
`--gil` so that only the samples of a thread holding the GIL count (the CPU Python spends; a wait in `epoll` or a
blocking read does not):

    py-spy record -p PID -r 200 --gil --format raw --duration 15 -o FILE
    python benchmarks/spy_buckets.py FILE [FILE ...] [--callees FUNCTION]

Each sample goes to the first bucket of `BUCKETS` that a frame of its stack names, so that the chunk callback's
analyzer (`Analyzer.feed`, its clock's `Analyzer.tick`) is told apart from what surrounds it: the source's read
and wait, the follower's bookkeeping per chunk, the event loop itself, and the per-incarnation churn of a crash
loop (verdicts, status snapshots, the store, the announcer, the daemon's log lines). `--callees FUNCTION`: the
frames right under FUNCTION (its qualified name as py-spy writes it, e.g. `LaunchFollower._push`), each with its
share of all samples.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

# (bucket, texts any of which a stack's frame holds): the first bucket that matches takes the sample
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    (
        "analyzer: the chunk's feed and the clock's tick",
        ("Analyzer.feed ", "Analyzer.tick ", "Analyzer.report_open_tracebacks", "Analyzer.prepare"),
    ),
    ("incarnation: verdict builds", ("build_verdict", "verdict_of", "LaunchFollower._verdict")),
    ("incarnation: status snapshots", ("LaunchFollower.status", "_snapshot (", "_take_snapshots")),
    ("incarnation: the store (SQLite, its thread)", ("watchdog/store/", "sqlite3")),
    ("incarnation: announcer and alerts", ("watchdog/daemon/announce", "watchdog/alerts/")),
    ("logging (structlog, the daemon's log lines)", ("structlog", "watchdog/daemon/logs.py")),
    (
        "incarnation: the daemon's handling of updates",
        ("Daemon._consume", "Daemon._updated", "Daemon._effects", "Daemon._change"),
    ),
    ("checkpoints", ("watchdog/follow/checkpoint.py", "recordtext")),
    ("the follower per chunk (the rest of _push)", ("LaunchFollower._push",)),
    ("asyncssh (packets: decryption, parsing, dispatch)", ("asyncssh/",)),
    (
        "the SSH source",
        ("sources/ssh.py", "sources/remote.py", "sources/channel.py", "sshpool", "keepalive", "readslices"),
    ),
    ("the local source's read and wait", ("_Follow.", "LocalSource.", "sources/local.py")),
    ("inotify", ("sources/inotify.py",)),
    (
        "clock tasks (the rest of _ticks, _settle)",
        ("LaunchFollower._ticks", "LaunchFollower._settle", "clock.py"),
    ),
    ("the follower per item (run, _item, _apply)", ("LaunchFollower.",)),
    ("worker threads' plumbing", ("WorkerThread", "run_sync", "to_thread", "Thread._bootstrap")),
    ("the event loop (select, its turn, callbacks' dispatch)", ("_run_once", "Handle._run", "selectors.py")),
]

_FRAME = re.compile(r" \((.*?):\d+\)$")


def _samples(path: str) -> list[tuple[str, int]]:
    out = []
    with open(path) as file:
        for line in file:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if stack:
                out.append((stack, int(count)))
    return out


def buckets(path: str) -> tuple[Counter[str], int]:
    """The samples of the raw file `path` by bucket, and their number."""
    out: Counter[str] = Counter()
    total = 0
    for stack, count in _samples(path):
        total += count
        name = next((b for b, keys in BUCKETS if any(k in stack for k in keys)), None)
        out[name or "other: " + stack.split(";")[-1][:70]] += count
    return out, total


def callees(path: str, function: str) -> tuple[Counter[str], int]:
    """The frames right under the first `function` of each stack, and the number of samples in all."""
    out: Counter[str] = Counter()
    total = 0
    for stack, count in _samples(path):
        total += count
        frames = [_FRAME.sub(r" (\1)", f) for f in stack.split(";")]
        at = next((i for i, f in enumerate(frames) if f.startswith(function + " ")), None)
        if at is not None:
            out[frames[at + 1] if at + 1 < len(frames) else "<itself>"] += count
    return out, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", help="py-spy raw files (--format raw)")
    parser.add_argument("--callees", help="also the frames right under this function")
    args = parser.parse_args(argv)
    for path in args.files:
        counted, total = buckets(path)
        print(f"{path}: {total} samples")
        for name, count in counted.most_common():
            print(f"  {100 * count / max(total, 1):5.1f} %  {count:6d}  {name}")
        if args.callees:
            under, total = callees(path, args.callees)
            print(f"  under {args.callees}:")
            for name, count in under.most_common(15):
                print(f"    {100 * count / max(total, 1):5.1f} %  {count:6d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
