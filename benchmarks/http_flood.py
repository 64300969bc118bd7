"""Idle HTTP connections held against `watchdog run`: the daemon's CPU, its log bytes, and whether it answers.

One `watchdog run --config FILE` process (the working tree, as `python -m watchdog.cli`, log_format "json", one
local launch) is started with RLIMIT_NOFILE set to `--nofile` (default 1024, the soft limit systemd gives a
service). Then `--connections` (default 1030) TCP connections are opened to its HTTP port and held, sending
nothing, for `--seconds` (default 30). Measured over that window:
  - the daemon's CPU time (/proc/PID/stat utime + stime) as % of one core;
  - the bytes and lines it wrote to its log (standard error) from the first connection on, and how many of them
    say "Too many open files";
  - GET /status on a fresh connection, every second: how many answered 200 within 2 s;
  - how many of the held connections the daemon had closed by the end of the window.

    python benchmarks/http_flood.py [--connections 1030] [--seconds 30] [--nofile 1024] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_DEADLINE = 60.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / float(__import__("os").sysconf("SC_CLK_TCK"))


def _closed(sockets: list[socket.socket]) -> int:
    """How many of `sockets` the peer has closed (readable with EOF, or reset)."""
    closed = 0
    with selectors.DefaultSelector() as sel:
        for s in sockets:
            sel.register(s, selectors.EVENT_READ)
        for key, _ in sel.select(timeout=0):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096, socket.MSG_PEEK)
            except OSError:
                closed += 1
                continue
            closed += data == b"" or data.startswith(b"HTTP/1.1 503")
    return closed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=1030)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="watchdog-http-flood-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "server.log").write_text("")
    config = work / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{work / "state"}"
log_format = "json"

[launches.local]
log = "{work / "server.log"}"
"""
    )
    log_path = work / "daemon.log"
    nofile = args.nofile

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            preexec_fn=limit,  # noqa: PLW1509 - only setrlimit, before exec
            cwd=ROOT,
        )
    try:
        url = ""
        end = time.monotonic() + START_DEADLINE
        while not url and time.monotonic() < end:
            for line in log_path.read_text().splitlines():
                event = json.loads(line) if line.startswith("{") else {}
                if event.get("event") == "http_listening":
                    url = str(event["url"]).rstrip("/")
            time.sleep(0.1)
        if not url:
            raise SystemExit(
                f"the daemon did not listen within {START_DEADLINE:g}s: {log_path.read_text()[-2000:]}"
            )
        host, port = url.removeprefix("http://").rsplit(":", 1)

        bytes0, lines0 = log_path.stat().st_size, len(log_path.read_bytes().splitlines())
        held: list[socket.socket] = []
        failed_connects = 0
        for _ in range(args.connections):
            try:
                held.append(socket.create_connection((host, int(port)), timeout=2))
            except OSError:
                failed_connects += 1
        cpu0 = _cpu_seconds(proc.pid)
        t0 = time.monotonic()
        answered = asked = 0
        stop = threading.Event()

        def probe() -> None:
            nonlocal answered, asked
            while not stop.wait(1.0):
                asked += 1
                try:
                    with urllib.request.urlopen(url + "/status", timeout=2) as response:
                        answered += response.status == 200
                except OSError:
                    pass

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        time.sleep(args.seconds)
        stop.set()
        prober.join()
        wall = time.monotonic() - t0
        cpu = _cpu_seconds(proc.pid) - cpu0
        body = log_path.read_bytes()
        window = body[bytes0:]
        closed = _closed(held)
        for s in held:
            s.close()
        print(
            f"connections opened {len(held)} (refused at connect: {failed_connects}), held {wall:.1f}s, RLIMIT_NOFILE {nofile}"
        )
        print(f"daemon CPU {cpu:.2f}s = {100 * cpu / wall:.1f}% of a core")
        print(
            f"daemon log {len(window):,} bytes, {len(body.splitlines()) - lines0:,} lines, "
            f"{window.count(b'Too many open files'):,} say 'Too many open files'"
        )
        print(f"GET /status on a fresh connection: {answered}/{asked} answered 200 within 2s")
        print(f"held connections closed by the daemon by the end: {closed}/{len(held)}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
