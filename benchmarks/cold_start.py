"""Cold start of `watchdog run`: seconds from its HTTP answer until every launch has been read.

    python benchmarks/cold_start.py [--launches 200] [--hosts 4] [--profile]

Starts the test sshd (tests/sshd_server.py), names it as 4 hosts (one SSH pool each), writes a finished
SGLang start into each launch's log, runs the daemon and polls /status until every launch is `ready`.
Prints the time from spawn to the first HTTP answer and from that answer to the last launch read.
With --profile, the daemon runs under cProfile and its 25 most expensive functions are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from sshd_server import start_sshd, stop_sshd  # noqa: E402

READY = ROOT / "tests" / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"


def _machine_busy() -> float:
    """CPU seconds the whole machine spent busy (not idle, not waiting on I/O) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument(
        "--no-rc",
        action="store_true",
        help="sessions skip the login shell's ~/.bashrc (sshd SetEnv SHLVL=1: bash reads it for an SSH command "
        "only at shell level 1); a .bashrc that runs `pyenv init` serializes 200 sessions on pyenv's rehash lock",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sshd = start_sshd(work / "sshd", extra_config=["SetEnv SHLVL=1"] if args.no_rc else ())
        try:
            hosts = "".join(
                f'\n[hosts.gpu{h}]\naddress = "127.0.0.1"\nport = {sshd.port}\nuser = "{sshd.user}"\n'
                f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                for h in range(args.hosts)
            )
            data = READY.read_bytes()
            launches = ""
            for i in range(args.launches):
                log = work / f"l{i}.log"
                log.write_bytes(data)
                launches += f'\n[launches.l{i}]\nhost = "gpu{i % args.hosts}"\nlog = "{log}"\n'
            config = work / "watchdog.toml"
            config.write_text(
                f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{work / "state"}"\nlog_format = "json"\n'
                + hosts
                + launches
            )
            prof = Path(os.environ.get("COLD_START_PROFILE", work / "profile.out"))
            cmd = [sys.executable]
            if args.profile:
                cmd += ["-m", "cProfile", "-o", str(prof)]
            cmd += ["-m", "watchdog.cli", "run", "--config", str(config)]
            busy_before = _machine_busy()
            spawned = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            assert proc.stderr is not None
            url = ""
            for line in proc.stderr:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "http_listening":
                    url = event["url"]
                    break
            answered = time.monotonic()
            # keep reading its log, or the daemon blocks on a full pipe
            import threading  # noqa: PLC0415

            daemon_log = open(os.environ.get("COLD_START_LOG", os.devnull), "w")  # noqa: SIM115
            threading.Thread(target=lambda: [daemon_log.write(x) for x in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            states: dict[str, int] = {}
            ready_at: dict[str, float] = {}  # launch -> seconds after the HTTP answer it was first seen ready
            while time.monotonic() - answered < args.deadline:
                with urllib.request.urlopen(url + "status", timeout=30) as response:
                    statuses = json.load(response)
                states = {}
                now = time.monotonic() - answered
                for s in statuses:
                    states[s["state"]] = states.get(s["state"], 0) + 1
                    if s["state"] == "ready":
                        ready_at.setdefault(s["name"], now)
                if len(statuses) == args.launches and states.get("ready") == args.launches:
                    break
                time.sleep(0.1)
            done = time.monotonic()
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            busy = _machine_busy() - busy_before
            proc.send_signal(2)
            proc.wait(60)
        finally:
            stop_sshd(sshd)
        print(
            f"{args.launches} launches on {args.hosts} hosts: HTTP answered {answered - spawned:.1f} s after spawn; "
            f"every launch read {done - answered:.1f} s after that ({states}); the daemon used {cpu:.1f} CPU s "
            f"(load average {os.getloadavg()[0]:.0f})"
        )
        within = ", ".join(
            f"{sum(t <= limit for t in ready_at.values())} within {limit:g} s"
            for limit in (5, 10, 20, 30, 60)
        )
        print(
            f"the machine was busy {busy:.1f} CPU s of {(done - spawned) * (os.cpu_count() or 1):.1f} "
            f"({os.cpu_count()} cores x {done - spawned:.1f} s): {busy - cpu:.1f} CPU s besides the daemon "
            "(the test sshd, its sessions' shells, tails and stats, anything else running)"
        )
        print(f"of {args.launches} launches, read (ready) after the HTTP answer: {within}")
        if args.profile and prof.exists():
            import pstats  # noqa: PLC0415

            pstats.Stats(str(prof)).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
