"""benchmarks/daemon_counts.py: a real `watchdog run` with benchmarks/counts/ on its PYTHONPATH counts its calls, and
the load window's rates are read from what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchscripts import BENCHMARKS, load_script

daemon_counts = load_script("daemon_counts.py")
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "sglang"


def _row(t: float, feeds: int, builds: int) -> str:
    calls = {"Analyzer.feed": feeds, "build_verdict": builds, "LaunchFollower._settle": builds // 2}
    return json.dumps({"t": t, "calls": calls, "ns": {"build_verdict": builds * 1000}})


def test_the_window_is_the_seconds_under_load_less_two_at_each_end(tmp_path: Path) -> None:
    """The seconds with more than 500 feeds, less the first and last two: their calls and thread time summed."""
    feeds = [0, 10, 1010, 2010, 3010, 4010, 5010, 6010, 7010, 7020, 7030]  # 7 seconds of 1,000 feeds
    rows = [_row(float(t), f, 10 * t) for t, f in enumerate(feeds)]
    path = tmp_path / "counts.1"
    path.write_text("\n".join(rows) + "\n")
    seconds, calls, ns = daemon_counts.window(str(path))
    assert seconds == 3.0  # from 3 to 6 s: the seconds 1-8 under load, less 1-3 and 6-8
    assert calls["Analyzer.feed"] == 3000
    assert calls["build_verdict"] == 30
    assert ns["build_verdict"] == 30_000


@pytest.mark.timeout(120)
def test_a_daemon_run_with_the_counts_folder_writes_its_calls(tmp_path: Path) -> None:
    """`watchdog run` started as the bench starts it, with benchmarks/counts/ first on its PYTHONPATH and COUNT_OUT
    set: its file holds the calls of the functions wrapped (the feeds of its log, the verdict built of it)."""
    log = tmp_path / "launch.log"
    log.write_bytes((CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes())  # read at the start
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\n\n[launches.one]\nlog = "{log}"\n'
    )
    out = tmp_path / "counts"
    root = BENCHMARKS.parent
    env = {
        **os.environ,
        "COUNT_OUT": str(out),
        "PYTHONPATH": os.pathsep.join((str(BENCHMARKS / "counts"), str(root))),
    }
    daemon = subprocess.Popen(
        [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
        env=env,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        counted: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the daemon's file, written once a second: polled
            files = list(tmp_path.glob("counts.*"))
            if files:
                lines = files[0].read_text().splitlines()
                counted = json.loads(lines[-1])["calls"] if lines else {}
                if counted.get("build_verdict", 0) and counted.get("Analyzer.feed", 0):
                    break
            time.sleep(0.2)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    assert counted.get("Analyzer.feed", 0) >= 1
    assert counted.get("build_verdict", 0) >= 1  # its ready verdict
