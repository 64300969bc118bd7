"""The daemon under a team's load: CPU, memory and line-to-verdict latency of `watchdog run`, end to end.

One `watchdog run --config FILE` process (the working tree, as `python -m watchdog.cli`) follows N launches
(default 200) spread over H hosts (default 20). The hosts are H `[hosts.X]` entries that all point at one
throwaway OpenSSH sshd on 127.0.0.1 (started as the tests start it); the daemon keeps one SSH pool per host
name, so that is H connections. With `--local` every log is a file on this machine instead.

A writer, a separate process, grows every log with real corpus lines: a whole SGLang startup (arguments to
"The server is fired up and ready to roll!"), then what a serving SGLang logs (prefill, decode and access-log
lines), about 10 lines/s per log with bursts (on a 100 ms tick: usually 0 or 1 line, one tick in 20 a burst
of 8 to 16 lines), and after 8 to 20 s of serving a real post-ready scheduler crash ("Scheduler hit an
exception" and its uncaught traceback, written in one write); 1 to 2 s later the launch starts again (the
startup appended, a new incarnation). The writer notes the time just before and just after each crash's
write (a transition logged after the first counts; its latency is from the second, 0 if earlier); the daemon
logs each transition as a JSON line on standard error with its timestamp (log_format = "json"), so
line-to-verdict is the `crashed` transition's timestamp minus the write's, on the same clock.

Measured:
  - CPU % of one core of the daemon's process over the load window (/proc/PID/stat utime + stime);
  - its peak RSS (VmHWM in /proc/PID/status) at the end;
  - line-to-verdict p50/p99/max over every crash written in the window;
  - CPU % while every log is quiet (no write at all) for --quiet-seconds, from --quiet-lead seconds (default
    15) after the last write.
Also shown, for context: the writer's CPU and (SSH) the sshd side's (its sessions, tails and stat loops,
the whole machine's busy time less the daemon's and the writer's), which share the machine's cores.

The anchor, in the same run: one `tail -F -n 0` per log on this machine (GNU tail: inotify), started before the
writer, its CPU summed over the same two windows: what following every log costs at the least, without reading
it (unless --no-anchor).

    python benchmarks/daemon_bench.py [--launches 200] [--hosts 20] [--seconds 60] [--quiet-seconds 30]
                                      [--quiet-lead 15] [--local] [--stat-interval S] [--pin] [--ssh-multiplex auto|off]
                                      [--ssh-user NAME] [--workdir DIR]
                                      [--no-anchor] [--check] [--trace DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "sglang"
TICK = 0.1  # s between the writer's rounds
BENCH_USER = "watchdog-bench"  # the account made for the SSH runs when this one is root with a busy shell
WARMUP = 3.0  # s of load before the measured window opens
# s after the last write before the quiet window opens: the idle cost, not the tail of the load (each launch's
# checkpoint is saved once its log has been quiet for 3 s, at most 10 s after the one before: watchdog.follow.checkpoint)
QUIET_LEAD = 15.0
START_DEADLINE = float(os.environ.get("DAEMON_BENCH_START_DEADLINE", "120"))  # s to read every log as it was
GOALS = {  # name: (bound, unit, what): issue 31's, for 200 launches at about 10 lines/s each
    "cpu": (10.0, "% of a core", "CPU, logs growing"),
    "rss": (120.0, "MB", "peak RSS"),
    "p99": (50.0, "ms", "line-to-verdict p99"),
    "quiet": (0.2, "% of a core", "CPU, all logs quiet"),
}
# From this many launches on, issue 31's goals for one daemon at scale (2,000 launches over SSH): it keeps up, no
# crash verdict later than 1 s after its line, on less than one core; memory and the idle cost grow with the launches
SCALE_LAUNCHES = 1000
GOALS_AT_SCALE = {
    "cpu": (100.0, "% of a core", "CPU, logs growing"),
    "max": (1000.0, "ms", "line-to-verdict max"),
}


def _corpus() -> tuple[list[bytes], list[bytes], bytes]:
    startup = (CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes().splitlines(keepends=True)
    serving = [
        line
        for line in (CORPUS / "ready-qwen25-vl-multimodal-then-traffic-notebook-docs.log")
        .read_bytes()
        .splitlines(keepends=True)
        if b"Decode batch" in line or b"Prefill batch" in line or b'"POST ' in line
    ]
    crash = (
        (CORPUS / "postready-scheduler-valueerror-lmcache-tp2-pr869.log").read_bytes().splitlines(True)[1:]
    )
    return startup, serving, b"".join(crash)


# -- the writer (a process of its own) ---------------------------------------------------------------------


@dataclass
class _Log:
    name: str
    fd: int
    mode: str = "serving"  # serving, quiet, startup
    until: float = 0.0  # serving: when it crashes; quiet: when it starts again
    pos: int = 0  # startup: the next line


def _burst(rng: random.Random) -> int:
    # 10 lines/s on average at a 100 ms tick: 0.95 * 0.42 + 0.05 * 12 = 1.0 line a tick
    if rng.random() < 0.05:
        return rng.randint(8, 16)
    return 1 if rng.random() < 0.42 else 0


def next_write(
    log: _Log,
    now: float,
    rng: random.Random,
    startup: list[bytes],
    serving: list[bytes],
    serve_at: int,
    serve: tuple[float, float] = (8.0, 20.0),
) -> tuple[bool, bytes, int]:
    """What `log` writes on the tick at `now`, and its next state: (its crash is due, else the bytes to append,
    the serving lines' cursor after them). A crash is followed by 1-2 s of quiet, then the startup again."""
    data = b""
    if log.mode == "serving":
        if now >= log.until:
            log.mode, log.until = "quiet", now + rng.uniform(1.0, 2.0)
            return True, data, serve_at
        n = _burst(rng)
        data = b"".join(serving[(serve_at + k) % len(serving)] for k in range(n))
        serve_at += n
    elif log.mode == "quiet":
        if now >= log.until:
            log.mode, log.pos = "startup", 0
    else:
        n = max(_burst(rng), 1)
        data = b"".join(startup[log.pos : log.pos + n])
        log.pos += n
        if log.pos >= len(startup):
            log.mode, log.until = "serving", now + rng.uniform(*serve)
    return False, data, serve_at


def write_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Grow the logs until spec["end"] (wall clock); return the crash write times and the totals."""
    startup, serving, crash = _corpus()
    rng = random.Random(spec["seed"])
    serve = tuple(spec.get("serve", (8.0, 20.0)))
    logs = []
    for name, path in spec["logs"]:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        logs.append(_Log(name, fd, until=time.time() + rng.uniform(min(2.0, serve[0]), serve[1])))
    crashes: list[tuple[str, float, float]] = []  # launch, time just before and just after the write
    lines = nbytes = 0
    serve_at = 0
    next_tick = time.monotonic()
    while time.time() < spec["end"]:
        for log in logs:
            crashes_now, data, serve_at = next_write(log, time.time(), rng, startup, serving, serve_at, serve)
            if crashes_now:
                before = time.time()
                os.write(log.fd, crash)
                crashes.append((log.name, before, time.time()))
                nbytes += len(crash)
                lines += crash.count(b"\n")
            elif data:
                os.write(log.fd, data)
                nbytes += len(data)
                lines += data.count(b"\n")
        next_tick += TICK
        time.sleep(max(next_tick - time.monotonic(), 0.0))
    for log in logs:
        os.close(log.fd)
    return {"crashes": crashes, "lines": lines, "bytes": nbytes, "ended": time.time()}


# -- measuring a process -----------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int, *, children: bool = False) -> float:
    """utime + stime of a process (and, with children, of its reaped children) in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _CLK_TCK


def _ssh_user(requested: str | None) -> str:
    """The account to log in as: one whose login shell starts nothing (see `--ssh-user`)."""
    me = pwd.getpwuid(os.getuid())
    if requested:
        return requested
    if Path(me.pw_shell).name in ("sh", "dash"):
        return me.pw_name
    if os.getuid() != 0:
        print(
            f"note: logging in as {me.pw_name}, whose login shell {me.pw_shell} runs its start-up files on every command"
        )
        return me.pw_name
    try:
        pwd.getpwnam(BENCH_USER)
    except KeyError:
        command = [
            "useradd",
            "--system",
            "--home-dir",
            "/tmp",
            "--shell",
            "/bin/sh",
            "--password",
            "*",
            BENCH_USER,
        ]
        subprocess.run(command, check=True)
    return BENCH_USER


def machine_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as file:
        fields = [int(field) for field in file.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _start_tails(paths: list[str], cpus: set[int] | None) -> list[subprocess.Popen[bytes]]:
    """One `tail -F -n 0` per log, output dropped: the anchor (on the CPUs `cpus`, if given)."""
    tails = []
    for path in paths:
        tail = subprocess.Popen(["tail", "-F", "-n", "0", "-q", path], stdout=subprocess.DEVNULL)
        if cpus:
            os.sched_setaffinity(tail.pid, cpus)
        tails.append(tail)
    return tails


def _tails_cpu(tails: list[subprocess.Popen[bytes]]) -> float:
    # each tail uses far less than a clock tick (10 ms) a second: /proc/PID/schedstat's run time (ns) where the
    # kernel gives it, else stat's ticks (which then round each small figure down)
    total = 0.0
    for tail in tails:
        try:
            with open(f"/proc/{tail.pid}/schedstat") as file:
                total += int(file.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            total += _cpu_seconds(tail.pid)
    return total


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # nearest rank
    return ordered[int(rank) - 1]


# -- the daemon ---------------------------------------------------------------------------------------------


@dataclass
class _Daemon:
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    listening: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "text", "text": line.rstrip()}
            self.events.append(event)
            if event.get("event") == "http_listening":
                self.url = event["url"]
                self.listening.set()
        self.listening.set()


def _config(
    workdir: Path,
    logs: list[tuple[str, str, str]],
    sshd: Any,
    stat_interval: float | None,
    multiplex: str | None = None,
) -> Path:
    out = [
        "[daemon]",
        'listen = "127.0.0.1:0"',
        f'state_dir = "{workdir / "state"}"',
        'log_format = "json"',
        "",
    ]
    for host in sorted({h for _, h, _ in logs if h}):
        out += [
            f"[hosts.{host}]",
            'address = "127.0.0.1"',
            f"port = {sshd.port}",
            f'user = "{sshd.user}"',
            f'identity = "{sshd.client_key}"',
            f'known_hosts = "{sshd.known_hosts}"',
            *([f"stat_interval = {stat_interval}"] if stat_interval is not None else []),
            *([f'ssh_multiplex = "{multiplex}"'] if multiplex is not None else []),
            "",
        ]
    for name, host, path in logs:
        out += [f"[launches.{name}]"] + ([f'host = "{host}"'] if host else []) + [f'log = "{path}"', ""]
    config = workdir / "watchdog.toml"
    config.write_text("\n".join(out))
    return config


def _statuses(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "status", timeout=30) as response:
        data: list[dict[str, Any]] = json.loads(response.read())
        return data


def _wait_caught_up(daemon: _Daemon, launches: int) -> float:
    start = time.monotonic()
    if not daemon.listening.wait(START_DEADLINE) or not daemon.url:
        raise SystemExit(f"the daemon did not start; its log: {daemon.events[-20:]}")
    while time.monotonic() - start < START_DEADLINE:
        try:
            statuses = _statuses(daemon.url)
        except TimeoutError:  # a busy start (2,000 launches on a shared 2-core machine): asked again
            continue
        if len(statuses) == launches and all(s.get("lines_read", 0) > 0 for s in statuses):
            return time.monotonic() - start
        time.sleep(0.5)
    raise SystemExit(f"not every launch read its log within {START_DEADLINE}s")


def _parse_ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _latencies(
    events: list[dict[str, Any]], crashes: list[tuple[str, float, float]], window: tuple[float, float]
) -> tuple[list[float], list[str]]:
    seen: dict[str, list[float]] = {}
    for e in events:
        if e.get("event") == "transition" and e.get("state") == "crashed":
            seen.setdefault(e["launch"], []).append(_parse_ts(e["timestamp"]))
    out: list[float] = []
    missed: list[str] = []
    for name, began, written in crashes:
        if not window[0] <= written <= window[1]:
            continue
        # the daemon may say it before the writer, descheduled after its write, has noted the time: 0 then
        after = [t for t in seen.get(name, []) if t >= began - 0.0005]
        if after:
            out.append(max(min(after) - written, 0.0))
        else:
            missed.append(name)
    return out, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window under load")
    parser.add_argument("--quiet-seconds", type=float, default=30.0, help="the measured window, all quiet")
    parser.add_argument(
        "--quiet-lead", type=float, default=QUIET_LEAD, help="seconds after the last write before it opens"
    )
    parser.add_argument("--local", action="store_true", help="every log a file on this machine (no SSH)")
    parser.add_argument(
        "--stat-interval",
        type=float,
        help="the hosts' stat_interval in seconds (SSH; default: the config's, 0.25): where inotify cannot tell "
        "the remote reader of a rotation, how often it looks",
    )
    parser.add_argument(
        "--ssh-user",
        help=f"the account the daemon logs in as (SSH; default: this one if its login shell is sh or dash, else, "
        f"as root, {BENCH_USER!r}, created with /bin/sh as docs/least-privilege.md advises)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run the daemon on CPU 0 and everything else (sshd and the remote scripts, the writer, this script) "
        "on the other CPUs, as on a deployment where the remote side runs on the GPU hosts",
    )
    parser.add_argument(
        "--ssh-multiplex",
        choices=("auto", "off"),
        help="the hosts' ssh_multiplex (SSH; default: the config's): auto, every log of a host through one channel",
    )
    parser.add_argument("--workdir", type=Path, help="keep the logs, config and daemon log here")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--serve-seconds",
        type=float,
        nargs=2,
        default=(8.0, 20.0),
        metavar=("LO", "HI"),
        help="how long a launch serves before it crashes, drawn between LO and HI (the first time from 2 s); "
        "`inf inf`: no crash at all, the steady lines alone (the split of issue 31's CPU round 11)",
    )
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the daemon")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the checkout whose `watchdog` the daemon runs (its folder is the daemon's first on sys.path); "
        "default this script's",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument(
        "--no-anchor", action="store_true", help="start no `tail -F` per log beside the daemon"
    )
    parser.add_argument(
        "--trace",
        type=Path,
        help="run the daemon under benchmarks/loop_trace.py, which writes its callbacks' CPU times and the garbage "
        "collector's pauses to this folder (`python benchmarks/loop_trace.py --show DIR`); costs CPU of its own",
    )
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)  # internal: run as the writer
    args = parser.parse_args(argv)
    if args.writer is not None:
        spec = json.loads(args.writer.read_text())
        Path(spec["out"]).write_text(json.dumps(write_load(spec)))
        return 0

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="wd-daemon-bench-"))
    others = set(range(1, os.cpu_count() or 1))
    if args.pin:
        if not others:
            raise SystemExit("--pin needs at least 2 CPUs")
        os.sched_setaffinity(0, others)  # this script and the writer it starts
    workdir.mkdir(parents=True, exist_ok=True)
    user = None if args.local else _ssh_user(args.ssh_user)
    shared = workdir  # the logs and sshd's files (its authorized_keys): what the account logging in reads
    if user is not None and user != pwd.getpwuid(os.getuid()).pw_name:
        if all(folder.stat().st_mode & 0o001 for folder in workdir.resolve().parents):
            workdir.chmod(0o755)
        else:
            shared = Path(tempfile.mkdtemp(prefix="wd-daemon-bench-shared-", dir="/tmp"))
            shared.chmod(0o755)
            print(f"note: the logs and sshd's files are in {shared}: {user} cannot reach {workdir}")
    logs_dir = shared / "logs"
    logs_dir.mkdir(exist_ok=True)
    startup, _, _ = _corpus()
    logs = []
    for i in range(args.launches):
        name, host = f"l{i:03d}", "" if args.local else f"h{i % args.hosts:02d}"
        path = logs_dir / f"{name}.log"
        path.write_bytes(b"".join(startup))  # each launch has started and is ready when the daemon starts
        logs.append((name, host, str(path)))

    sshd = None
    if not args.local:
        sys.path.insert(0, str(ROOT / "tests"))
        from sshd_server import start_sshd  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 - SSH only

        sshd = start_sshd(shared / "sshd")
        if args.pin:
            os.sched_setaffinity(sshd.process.pid, others)  # its sessions, forked later, inherit it
        assert user is not None
        sshd.user = user
    config = _config(workdir, logs, sshd, args.stat_interval, args.ssh_multiplex)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    tracer = []
    if args.trace is not None:
        tracer, env["LOOP_TRACE"] = [str(ROOT / "benchmarks" / "loop_trace.py")], str(args.trace.resolve())
    proc = subprocess.Popen(
        [args.python, *tracer, "-m", "watchdog.cli", "run", "--config", str(config)],
        cwd=args.tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if args.pin:
        os.sched_setaffinity(proc.pid, {0})  # at once: the threads it starts later inherit it
    daemon = _Daemon(proc)
    threading.Thread(target=daemon.read, daemon=True).start()
    writer = None
    tails: list[subprocess.Popen[bytes]] = []
    try:
        started_in = _wait_caught_up(daemon, args.launches)
        if not args.no_anchor:
            tails = _start_tails([p for _, _, p in logs], others if args.pin else None)
        spec_path, out_path = workdir / "writer.json", workdir / "writer-out.json"
        t0 = time.time()
        load_end = t0 + WARMUP + args.seconds
        spec = {
            "logs": [(n, p) for n, _, p in logs],
            "end": load_end,
            "seed": args.seed,
            "out": str(out_path),
            "serve": list(args.serve_seconds),
        }
        spec_path.write_text(json.dumps(spec))
        before_writer = _cpu_seconds(proc.pid)
        writer = subprocess.Popen([args.python, __file__, "--writer", str(spec_path)], cwd=ROOT)
        time.sleep(max(t0 + WARMUP - time.time(), 0))
        pid = proc.pid
        cpu0, w0, t0_cpu, s0, window0 = (
            _cpu_seconds(pid),
            _cpu_seconds(writer.pid),
            _tails_cpu(tails),
            machine_cpu_seconds(),
            time.time(),
        )
        time.sleep(max(load_end - time.time(), 0))
        cpu1, w1, t1_cpu, window1 = (
            _cpu_seconds(pid),
            _cpu_seconds(writer.pid),
            _tails_cpu(tails),
            time.time(),
        )
        s1 = machine_cpu_seconds()
        writer.wait(timeout=30)
        result = json.loads(out_path.read_text())
        time.sleep(max(result["ended"] + args.quiet_lead - time.time(), 0))
        q0, tq0, quiet0 = _cpu_seconds(pid), _tails_cpu(tails), time.time()
        qs0 = machine_cpu_seconds()
        time.sleep(args.quiet_seconds)
        q1, tq1, quiet1 = _cpu_seconds(pid), _tails_cpu(tails), time.time()
        qs1 = machine_cpu_seconds()
        hwm_mb, rss_mb = _status_kb(pid, "VmHWM") / 1024, _status_kb(pid, "VmRSS") / 1024
        threads = _status_kb(pid, "Threads")
        statuses = _statuses(daemon.url)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if writer is not None and writer.poll() is None:
            writer.kill()
            writer.wait()
        for tail in tails:
            tail.kill()
            tail.wait()
        if sshd is not None:
            from sshd_server import stop_sshd  # noqa: PLC0415

            stop_sshd(sshd)
        (workdir / "daemon-log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in daemon.events))

    span, quiet_span = window1 - window0, quiet1 - quiet0
    cpu = 100 * (cpu1 - cpu0) / span
    quiet = 100 * (q1 - q0) / quiet_span
    lat, missed = _latencies(daemon.events, [tuple(c) for c in result["crashes"]], (window0, window1))
    if not lat and result["crashes"]:
        raise SystemExit(f"no crash verdict seen in the window ({len(missed)} crashes written)")
    p50, p99, worst = (1000 * _percentile(lat, q) for q in (50, 99, 100)) if lat else (0.0, 0.0, 0.0)
    failures = [e for e in daemon.events if e.get("level") in ("warning", "error")]

    mode = "local files" if args.local else f"over SSH, {args.hosts} host names -> one sshd on 127.0.0.1"
    pinned = "; the daemon pinned to CPU 0, the rest to the others" if args.pin else ""
    print(
        f"watchdog run: {args.launches} launches, {mode}; {os.cpu_count()} CPUs{pinned}, load {os.getloadavg()}"
    )
    print(f"  started (every log read) in {started_in:.1f} s; daemon exit code {code} after SIGTERM")
    print(
        f"  load window {span:.1f} s: writer wrote {result['lines']:,} lines, {result['bytes'] / 1e6:.1f} MB "
        f"in {WARMUP + args.seconds:.0f} s ({result['lines'] / (WARMUP + args.seconds) / args.launches:.1f} "
        f"lines/s per log); {len(lat)} crashes in the window judged, {len(missed)} not"
    )
    # (the machine's ticks and the processes' are read at slightly different moments: never below 0)
    rest = max(0.0, 100 * (s1 - s0 - (cpu1 - cpu0) - (w1 - w0) - (t1_cpu - t0_cpu)) / span)
    rest_quiet = max(0.0, 100 * (qs1 - qs0 - (q1 - q0) - (tq1 - tq0)) / quiet_span)
    # what the writer's lines cost the daemon in all, its catching up included (a figure that a daemon behind its
    # logs on a loaded machine does not lower, as it lowers the load window's share of a core)
    print(
        f"  daemon CPU from the writer's start to the quiet window's end: {q1 - before_writer:.2f} s, "
        f"{1e6 * (q1 - before_writer) / max(result['lines'], 1):.1f} us a line written"
    )
    print(f"  writer CPU {100 * (w1 - w0) / span:.1f} % of a core; the rest of the machine", end=" ")
    print(
        f"({'sshd, the remote scripts, ' if sshd is not None else ''}the kernel, anything else running)",
        end=" ",
    )
    print(f"{rest:.1f} % under load, {rest_quiet:.1f} % quiet")
    if tails:
        print(
            f"  anchor: tail -F of each log ({len(tails)} processes): {100 * (t1_cpu - t0_cpu) / span:.3f} % of a "
            f"core under load, {100 * (tq1 - tq0) / quiet_span:.3f} % quiet"
        )
    if sshd is not None:
        print(f"  SSH user {sshd.user}, login shell {pwd.getpwnam(sshd.user).pw_shell}")
    print(f"  daemon threads at the end: {threads}; RSS now {rss_mb:.0f} MB")
    states: dict[str, int] = {}
    for s in statuses:
        states[s["state"]] = states.get(s["state"], 0) + 1
    print(f"  states at the end: {states}; daemon warnings/errors logged: {len(failures)}")
    measured = {"cpu": cpu, "rss": hwm_mb, "p99": p99, "quiet": quiet, "max": worst}
    goals = GOALS if args.launches < SCALE_LAUNCHES else GOALS_AT_SCALE
    print()
    print(f"  {'measure':<28} {'measured':>12} {'goal':>16}")
    missed_goals = []
    for key, (bound, unit, what) in goals.items():
        ok = measured[key] <= bound
        missed_goals += [] if ok else [key]
        print(
            f"  {what:<28} {measured[key]:>12.1f} {'<= ' + str(bound) + ' ' + unit:>16}  {'met' if ok else 'MISSED'}"
        )
    for key, (_bound, unit, what) in GOALS.items():
        if key not in goals:  # measured all the same, with no goal at this scale
            print(f"  {what:<28} {measured[key]:>12.1f} {unit:>16}")
    print(f"  {'line-to-verdict p50, max':<28} {p50:>6.1f}, {worst:.1f} ms")
    print(f"\n  daemon log: {workdir / 'daemon-log.jsonl'}")
    if args.trace is not None:
        print(f"  loop trace: python benchmarks/loop_trace.py --show {args.trace}")
    return 1 if args.check and missed_goals else 0


if __name__ == "__main__":
    sys.exit(main())
