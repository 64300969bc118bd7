"""What following a log costs the GPU host: CPU per followed log of watchdog's remote reader, beside `tail`.

Runs N copies of a reader on N local files that a writer grows by about 10 lines/s each (a line every 100 ms),
and measures the whole machine's busy CPU (/proc/stat, less the writer's own) over the window, per log:

  - watchdog: the stream script `watchdog run` starts on a host for each log (`watchdog.follow.sources.remote.
    STREAM_SCRIPT`, at the default stat and tail intervals): a `tail -f` on the open file, a second `tail -F`
    on the path that wakes the stat loop when the path changes, the stat loop, and `cat`;
  - anchor: `tail -f LOG`, what `ssh host tail -f LOG` runs (GNU tail, inotify), the least a follower can cost;
  - anchor: `tail -F LOG` (by name, with retries: what a rotation-aware `tail` costs).

SSH itself (sshd's encryption of the bytes, the same for all three) is not in these figures. Nothing here is
remote: the readers run on this machine, as they would on the GPU host. The machine should be otherwise idle.

    python benchmarks/remote_bench.py [--logs 50] [--seconds 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_bench import machine_cpu_seconds  # type: ignore[import-not-found,unused-ignore]

from watchdog.follow.sources.remote import stream_command
from watchdog.follow.sources.ssh import DEFAULT_TAIL_INTERVAL
from watchdog.vocabulary import DEFAULT_STAT_INTERVAL

SETTLE = 1.5  # s after the readers start before the window opens (past the stream script's first second)
LINE = b"[2026-12-01 01:02:03 TP0] Decode batch. #running-req: 12, #token: 40960, gen throughput (token/s): 812.4\n"


def measure(command: list[str] | None, logs: list[Path], seconds: float) -> float:
    """Machine CPU % of one core per log while `command` (with the log's path appended, or watchdog's stream
    script when None) follows each log and the logs grow."""
    for log in logs:
        log.write_bytes(b"")
    readers = []
    for log in logs:
        if command is None:  # as sshd runs it: the user's shell parses one command line
            args: str | list[str] = stream_command(
                str(log), 0, stat_interval=DEFAULT_STAT_INTERVAL, tail_interval=DEFAULT_TAIL_INTERVAL
            )
        else:
            args = [*command, str(log)]
        readers.append(
            subprocess.Popen(
                args,
                shell=command is None,  # the command line is watchdog's own, its path quoted
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    files = [log.open("ab", buffering=0) for log in logs]
    try:
        end = time.monotonic() + SETTLE
        while time.monotonic() < end:  # the writer runs from the start: the readers see a live log
            for file in files:
                file.write(LINE)
            time.sleep(0.1)
        busy0, cpu0, t0 = machine_cpu_seconds(), time.process_time(), time.monotonic()
        while time.monotonic() < t0 + seconds:
            for file in files:
                file.write(LINE)
            time.sleep(0.1)  # pacing the writer at 10 lines/s per log
        busy1, cpu1, t1 = machine_cpu_seconds(), time.process_time(), time.monotonic()
    finally:
        for file in files:
            file.close()
        for reader in readers:
            if reader.stdin is not None:
                reader.stdin.close()  # the stream script's lifeline; `tail` gets SIGTERM below
            if command is not None:
                reader.terminate()
        for reader in readers:
            reader.wait(timeout=30)
    return max(0.0, 100 * ((busy1 - busy0) - (cpu1 - cpu0)) / (t1 - t0) / len(logs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wd-remote-bench-") as tmp:
        logs = [Path(tmp) / f"l{i:03d}.log" for i in range(args.logs)]
        idle = measure(["true"], logs, args.seconds)  # the writer and the machine alone
        rows = [
            ("watchdog's stream script", measure(None, logs, args.seconds)),
            ("anchor: tail -f LOG", measure(["tail", "-f"], logs, args.seconds)),
            ("anchor: tail -F LOG", measure(["tail", "-F"], logs, args.seconds)),
        ]
    print(
        f"the remote side: {args.logs} logs growing 10 lines/s each, {args.seconds:g} s window, {os.cpu_count()} CPUs"
    )
    print(f"  {'reader':<28} {'CPU per log':>14}")
    for what, value in rows:
        print(f"  {what:<28} {max(0.0, value - idle):>11.3f} % of a core")
    print(
        f"  (the machine without readers: {idle * args.logs:.1f} % of a core in all, taken off each figure)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
