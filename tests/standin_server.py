"""A stand-in inference server for launch-mode tests: prints a corpus log at its recorded pace, then exits, hangs
or keeps serving as that log's server did; optionally with child processes (tensor-parallel workers) in its
group, a SIGTERM it ignores, and its argv, working directory and environment written as JSON.

    python3 standin_server.py LOG [--timing FILE] [--scale F] [--then exit:N|hang] [--children N]
        [--ignore-term] [--report FILE] [ARG...]

Imported by the tests for `command` (its command line for a corpus case), `alive_in_session` and `end_sessions`
(what of a launch's session still runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_LLAMACPP = os.path.join(_HERE, "fixtures", "corpus", "llamacpp")
READY = os.path.join(_LLAMACPP, "captured-llamacpp-ready-cpu")  # a corpus case (NAME.log, NAME.timing): ready
CRASH = os.path.join(_LLAMACPP, "captured-llamacpp-context-too-large-cpu")  # ... crashed, out of memory
_CHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN) if {ignore} else None\ntime.sleep(1e6)\n"


def command(case: str, *extra: str, then: str = "hang") -> list[str]:
    """The stand-in's command line: `case`'s log (a corpus case's path without .log) at its recorded pace, sped up
    5 times, then `then`; `extra` options after."""
    log, timing = f"{case}.log", f"{case}.timing"
    return [sys.executable, __file__, log, "--timing", timing, "--scale", "0.2", "--then", then, *extra]


def alive_in_session(sid: int) -> list[int]:
    """The processes of session `sid` that still run (zombies are gone), read from /proc: what a launch left."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat.rpartition(") ")[2].split()
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:  # state, ppid, pgrp, session
            out.append(int(entry))
    return out


def end_sessions(sids: list[int]) -> None:
    """SIGKILL whatever is left of these sessions (a test's cleanup)."""
    for sid in sids:
        for pid in alive_in_session(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def main() -> None:
    """Run as the options say (see the module docstring)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--timing")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--then", default="hang")
    parser.add_argument("--children", type=int, default=0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--report")
    args, _rest = parser.parse_known_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    children = [
        subprocess.Popen([sys.executable, "-c", _CHILD.format(ignore=args.ignore_term)]).pid
        for _ in range(args.children)
    ]
    if args.report:
        report = {
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith("STANDIN_")},
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "sid": os.getsid(0),
            "stdin": os.readlink("/proc/self/fd/0"),
            "children": children,
        }
        with open(args.report + ".tmp", "w", encoding="utf-8") as file:
            json.dump(report, file)
        os.replace(args.report + ".tmp", args.report)
    with open(args.log, "rb") as file:
        lines = file.read().split(b"\n")
    times = [0.0] * len(lines)
    if args.timing:
        with open(args.timing, encoding="utf-8") as file:
            times = [float(t) * args.scale for t in file.read().split()]
    start = time.monotonic()
    out = sys.stdout.buffer
    for index, line in enumerate(lines):
        if index == len(lines) - 1 and not line:
            break
        due = start + (times[index] if index < len(times) else times[-1] if times else 0.0)
        time.sleep(max(0.0, due - time.monotonic()))
        out.write(line + b"\n")
        out.flush()
    if args.then.startswith("exit:"):
        sys.exit(int(args.then[5:]))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
