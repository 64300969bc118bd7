"""A running daemon following a log whose times jump while it is followed: its /metrics and `watchdog history`
say how long the phases took by the follower's clock, never by the log's jump back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from daemon_process import DaemonProcess
from http_client import get
from prometheus_client.parser import text_string_to_metric_families

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
SANE = 120.0  # seconds: more than this test can take, far less than the log's jump of two hours


def _samples(text: str, name: str) -> dict[str, float]:
    """The samples of `name` on a /metrics page, by their `phase` label (or "" without one)."""
    return {
        s.labels.get("phase", ""): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_a_log_that_jumps_two_hours_back_while_followed_is_measured_on_the_daemons_clock(
    tmp_path: Path,
) -> None:
    """A second launch appended to a followed log, its first two lines in time and the rest two hours back (a
    clock stepped back): the daemon's `watchdog_phase_seconds` and `watchdog_time_to_ready_seconds` are the
    seconds it saw, not -7200 nor unknown, and `watchdog history` prints no duration of hours and none
    negative."""
    lines = READY.read_text(encoding="utf-8").splitlines(keepends=True)
    log = tmp_path / "off.log"
    log.write_text("".join(lines), encoding="utf-8")  # the first launch: the backlog, judged whole
    state = tmp_path / "state"
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{state}"\nlog_format = "json"\n\n'
        f'[launches.off]\nlog = "{log}"\nengine = "sglang"\n'
    )
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        # announced only once the follower has read the log as it was: what comes next it sees as it comes
        daemon.wait(event="announced", launch="off", state="ready")
        again = [line.replace("[2025-01-23 19:", "[2025-01-24 10:") for line in lines]
        with log.open("a", encoding="utf-8") as f:
            f.write("".join(again[:2]))  # the second launch starts
        daemon.wait(event="transition", launch="off", state="starting", line=len(lines) + 1)
        with log.open("a", encoding="utf-8") as f:
            f.write("".join(line.replace("[2025-01-24 10:", "[2025-01-24 08:") for line in again[2:]))
        daemon.wait(event="announced", launch="off", state="ready", incarnation=2)
        text = get(url + "metrics", timeout=DEADLINE).text
        phases = _samples(text, "watchdog_phase_seconds")
        to_ready = _samples(text, "watchdog_time_to_ready_seconds")
        daemon.stop()
    finally:
        daemon.close()
    assert phases, text
    assert all(0 <= v < SANE for v in phases.values()), phases
    assert to_ready, text
    assert all(0 <= v < SANE for v in to_ready.values()), to_ready
    history = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", "off", "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=True,
    )
    second = next(r for r in json.loads(history.stdout) if r["incarnation"] == 2)
    assert 0 <= second["time_to_ready_seconds"] < SANE, second
    assert all(0 <= v < SANE for v in second["phase_durations"].values()), second
    shown = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", "off", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=True,
        env={"COLUMNS": "160", "PATH": ""},
    ).stdout
    assert not re.search(r"(?<![\d:])-\d|\d+h\d\dm", shown), shown
