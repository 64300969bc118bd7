"""Run one real engine launch and keep its log as the corpus keeps real logs, with the time of each line.

    python benchmarks/real_engines/capture.py NAME --engine E --out DIR [--kill-at REGEX[+SECONDS]]
        [--term-at REGEX[+SECONDS]] [--stop-at REGEX[+SECONDS]] [--timeout S] -- COMMAND ...

The command runs with its stdout and stderr joined, as `COMMAND > log 2>&1` would write them. Written:

- DIR/NAME.log: the bytes exactly as the engine wrote them;
- DIR/NAME.timing: one line per log line, the seconds from the launch's start to the moment that line was
  read (3 decimals), so a test can feed the log to a follower at its recorded pace;
- DIR/NAME.json: the label (tests/fixtures/corpus/SCHEMA.md). Its `source` and `captured` (the command, the
  environment given, the versions, the exit status or signal, the actions taken and when) are written here;
  `outcome`, `phase`, `category`, `root_cause` and `notes` are written by hand after reading the log (a new
  label is drafted with them null; a rerun keeps them).

Actions (each at most once): `--kill-at 'Loading weights'` sends SIGKILL to the whole process group when a
line matches, `--kill-at 'Loading weights+2.5'` 2.5 s later; `--term-at` sends SIGTERM; `--stop-at` ends the
capture (SIGTERM to the group) after a ready launch has been seen to serve (or just to bound it).
`--kill-child-at EngineCore 'REGEX'` sends SIGKILL only to the group's processes whose command line matches
(vLLM's engine core process, renamed by setproctitle), leaving the API server to report it;
`--request-at URL BODY 'REGEX'` POSTs one JSON request in a thread (its status is recorded with the actions).
`--run-at REGEX[+SECONDS] COMMAND` runs a shell command (a request: `curl -s localhost:8080/completion ...`)
once a line matches, beside the launch; its exit status and output go into the capture record, not the log;
`--stop-after-run SECONDS` then ends the capture that long after the command returned.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Action:
    """A signal sent to the launch's process group once a line matches (and a delay has passed)."""

    sig: signal.Signals
    pattern: re.Pattern[str]
    delay: float
    due: float | None = None
    done_at: float | None = None
    kind: str = field(default="")
    child: re.Pattern[str] | None = None  # signal only the processes of the group whose command line matches
    request: tuple[str, str] | None = None  # (url, JSON body): POST it instead of sending a signal


def _action(kind: str, sig: signal.Signals, spec: str) -> Action:
    pattern, _, delay = spec.rpartition("+") if re.search(r"\+\d+(\.\d+)?$", spec) else (spec, "", "0")
    return Action(sig, re.compile(pattern), float(delay), kind=kind)


def _group_members(pgid: int, match: re.Pattern[str]) -> list[int]:
    """The pids in process group `pgid` whose command line (as /proc shows it, after setproctitle) matches."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[2]) == pgid and match.search(cmdline):  # fields[2]: pgrp
            found.append(int(entry.name))
    return found


def _post(url: str, body: str, start: float, taken: list[dict[str, object]], ended: threading.Event) -> None:
    """POST `body` to `url` and record when it was sent, when it was answered and the status (or the error)."""
    deadline = time.monotonic() + 600
    while True:  # a server that logs nothing when ready (a WARNING log level) is probed until it accepts
        sent = round(time.monotonic() - start, 3)
        req = urllib.request.Request(url, body.encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as resp:
                result: object = resp.status
                resp.read()
        except urllib.error.HTTPError as e:
            result = e.code
        except (OSError, urllib.error.URLError) as e:
            refused = isinstance(getattr(e, "reason", e), ConnectionRefusedError)
            if refused and time.monotonic() < deadline and not ended.is_set():
                time.sleep(1)
                continue
            result = f"{type(e).__name__}: {e}"
        break
    taken.append(
        {
            "action": "request",
            "url": url,
            "sent": sent,
            "answered": round(time.monotonic() - start, 3),
            "result": result,
        }
    )


def _operator_signals() -> None:
    """Give this process SIGINT as a terminal's launch has it, so that the launch inherits it: a capture run in the
    background of a non-interactive shell (`cmd &`) starts with SIGINT ignored (POSIX), an ignored disposition
    survives exec and Python keeps it, so the launch would ignore the operator's Ctrl-C (as the first round-24
    captures did). A Python handler here is reset to the default in the exec'd launch."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def capture(
    name: str,
    command: list[str],
    out: Path,
    *,
    engine: str,
    actions: list[Action],
    timeout: float,
    env: dict[str, str] | None = None,
    versions: dict[str, str] | None = None,
    cwd: str | None = None,
    runs: tuple[tuple[Action, str], ...] = (),
    stop_after_run: float | None = None,
) -> dict[str, object]:
    """Run `command`, write NAME.log, NAME.timing and NAME.capture.json into `out`; return the capture record."""
    out.mkdir(parents=True, exist_ok=True)
    _operator_signals()
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,  # its own process group: a signal reaches every worker it forks
    )
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    data = bytearray()
    times: list[float] = []
    pending = b""
    taken: list[dict[str, object]] = []
    timed_out = False
    eof = False
    threads: list[threading.Thread] = []
    ended = threading.Event()  # set once the launch has exited: a request still waiting for it gives up
    ran: list[dict[str, object]] = []
    run_done: list[float] = []

    def run(shell: str) -> None:
        t0 = time.monotonic() - start
        res = subprocess.run(shell, shell=True, capture_output=True, text=True, timeout=120, check=False)
        t1 = time.monotonic() - start
        ran.append({"command": shell, "at": round(t0, 3), "took": round(t1 - t0, 3), "exit": res.returncode,
                    "output": (res.stdout + res.stderr)[-2000:]})  # fmt: skip
        run_done.append(t1)

    stop_after = Action(signal.SIGTERM, re.compile("$^"), 0.0, kind="stop")
    while not eof:
        now = time.monotonic() - start
        for a, shell in runs:
            if a.due is not None and a.done_at is None and now >= a.due:
                a.done_at = now
                threading.Thread(target=run, args=(shell,), daemon=True).start()
        if stop_after_run is not None and len(run_done) == len(runs) and runs and stop_after.due is None:
            stop_after.due = max(run_done) + stop_after_run
            actions = [*actions, stop_after]
        for a in actions:
            if a.due is not None and a.done_at is None and now >= a.due:
                a.done_at = now
                if a.request is not None:
                    thread = threading.Thread(
                        target=_post, args=(*a.request, start, taken, ended), daemon=True
                    )
                    thread.start()
                    threads.append(thread)
                elif a.child is not None:
                    pids = _group_members(proc.pid, a.child)
                    taken.append({"action": a.kind, "signal": a.sig.name, "at": round(now, 3), "pids": pids})
                    for pid in pids:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, a.sig)
                else:
                    taken.append({"action": a.kind, "signal": a.sig.name, "at": round(now, 3)})
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, a.sig)
        if now > timeout and not timed_out:
            timed_out = True
            taken.append({"action": "timeout", "signal": "SIGTERM", "at": round(now, 3)})
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        if now > timeout + 30:
            os.killpg(proc.pid, signal.SIGKILL)
        for _key, _ in sel.select(0.05):
            chunk = proc.stdout.read(65536)
            if chunk is None:
                continue
            if not chunk:
                eof = True
                break
            t = time.monotonic() - start
            data += chunk
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                times.append(t)
                text = line.decode("utf-8", "replace")
                for a in [*actions, *(r[0] for r in runs)]:
                    if a.due is None and a.pattern.search(text):
                        a.due = t + a.delay
    if pending:
        times.append(time.monotonic() - start)
    rc = proc.wait()
    ended.set()
    for thread in threads:
        thread.join(timeout=5)
    # a worker left behind by the engine (a forked engine core) would hold the next launch's port or memory
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    (out / f"{name}.log").write_bytes(bytes(data))
    (out / f"{name}.timing").write_text("".join(f"{t:.3f}\n" for t in times), encoding="utf-8")
    record: dict[str, object] = {
        "command": command,
        "env": env or {},
        "engine": engine,
        "versions": versions or {},
        "date": datetime.date.today().isoformat(),
        "exit": rc if rc >= 0 else None,
        "signal": signal.Signals(-rc).name if rc < 0 else None,
        "actions": taken,
        **({"requests": ran} if runs else {}),
        "seconds": round(time.monotonic() - start, 3),
        "lines": len(times),
    }
    path = out / f"{name}.json"
    vers = ", ".join(f"{k} {v}" for k, v in (versions or {}).items())
    draft = {
        "engine": engine,
        "source": f"captured {record['date']}: {' '.join(command)}, {vers}",
        "outcome": None,
        "phase": None,
        "category": None,
        "root_cause": None,
        "notes": "",
    }
    label = json.loads(path.read_text(encoding="utf-8")) if path.exists() else draft
    label["source"] = draft["source"]
    label["captured"] = record
    path.write_text(json.dumps(label, indent=2) + "\n", encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and capture one launch."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--engine", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kill-at", action="append", default=[])
    ap.add_argument("--term-at", action="append", default=[])
    ap.add_argument("--int-at", action="append", default=[])
    ap.add_argument("--stop-at", action="append", default=[])
    ap.add_argument(
        "--kill-child-at",
        nargs=2,
        action="append",
        default=[],
        metavar=("CHILD", "REGEX[+SECONDS]"),
        help="SIGKILL only the processes of the group whose command line matches CHILD (e.g. EngineCore)",
    )
    ap.add_argument(
        "--request-at",
        nargs=3,
        action="append",
        default=[],
        metavar=("URL", "BODY", "REGEX[+SECONDS]"),
        help="POST the JSON BODY to URL once (in a thread) when a line matches; its answer is recorded",
    )
    ap.add_argument("--run-at", nargs=2, action="append", default=[], metavar=("REGEX", "COMMAND"))
    ap.add_argument("--stop-after-run", type=float)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--version", action="append", default=[], help="NAME=VERSION, recorded in the label")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the launch")
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        ap.error("give the launch's command after --")
    split = argv.index("--")
    args = ap.parse_args(argv[:split])
    command = argv[split + 1 :]
    actions = (
        [_action("kill", signal.SIGKILL, s) for s in args.kill_at]
        + [_action("term", signal.SIGTERM, s) for s in args.term_at]
        + [_action("interrupt", signal.SIGINT, s) for s in args.int_at]
        + [_action("stop", signal.SIGTERM, s) for s in args.stop_at]
    )
    for child, spec in args.kill_child_at:
        actions.append(_action("kill-child", signal.SIGKILL, spec))
        actions[-1].child = re.compile(child)
    for url, body, spec in args.request_at:
        actions.append(_action("request", signal.SIGCONT, spec))
        actions[-1].request = (url, body)
    record = capture(
        args.name,
        command,
        args.out,
        engine=args.engine,
        actions=actions,
        timeout=args.timeout,
        env=dict(e.split("=", 1) for e in args.env),
        versions=dict(v.split("=", 1) for v in args.version),
        runs=tuple((_action("run", signal.SIGCONT, spec), shell) for spec, shell in args.run_at),
        stop_after_run=args.stop_after_run,
    )
    print(
        json.dumps({k: record[k] for k in ("exit", "signal", "actions", "seconds", "lines")}), file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
