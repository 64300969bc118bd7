"""CPU a `watchdog run` spends while every host refuses its key: 200 launches on 4 hosts, for N seconds.

    python benchmarks/refused_cpu.py [--seconds 60] [--launches 200] [--hosts 4]

Starts the test sshd (tests/sshd_server.py), points 4 host names at it with a key it does not accept, runs
the daemon for the given time and prints the CPU seconds it used (user + system, from /proc) in all, and its
share of one core once started (after --settle seconds).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sshd_server import _write_key, start_sshd, stop_sshd


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds of start-up left out of the rate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sshd = start_sshd(work / "sshd")
        try:
            wrong = work / "wrong_key"
            _write_key(wrong)
            hosts = "".join(
                f'\n[hosts.gpu{h}]\naddress = "127.0.0.1"\nport = {sshd.port}\nuser = "{sshd.user}"\n'
                f'identity = "{wrong}"\nknown_hosts = "{sshd.known_hosts}"\n'
                for h in range(args.hosts)
            )
            launches = "".join(
                f'\n[launches.l{i}]\nhost = "gpu{i % args.hosts}"\nlog = "{work / f"l{i}.log"}"\n'
                for i in range(args.launches)
            )
            config = work / "watchdog.toml"
            config.write_text(
                f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{work / "state"}"\nlog_format = "json"\n'
                + hosts
                + launches
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started = time.monotonic()
            time.sleep(args.settle)
            settled, settled_at = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(max(0.0, started + args.seconds - time.monotonic()))
            used = cpu_seconds(proc.pid)
            wall = time.monotonic() - started
            steady = (used - settled) / (time.monotonic() - settled_at)
            proc.terminate()
            proc.wait(30)
        finally:
            stop_sshd(sshd)
    print(
        f"{args.launches} launches on {args.hosts} refusing hosts, {wall:.0f} s: {used:.1f} CPU s in all; "
        f"after the first {args.settle:g} s, {steady:.1%} of a core (load average {os.getloadavg()[0]:.0f})"
    )


if __name__ == "__main__":
    main()
