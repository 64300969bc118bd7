"""A real daemon (`watchdog run`) compares a relaunch with the launch before: the flag that changed is in
/status's `changes`, in the alert a real webhook receiver got, on the status page's data and in `watchdog
history`, also when the daemon was restarted between the two launches (the launch before then comes from the
store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess
from http_client import get
from test_remember import DEADLINE, READY, Hook, _config

# READY is SGLang 0.4.1's ready launch: its `server_args=ServerArgs(...)` says mem_fraction_static=0.88
CHANGED = {"name": "mem_fraction_static", "flag": "--mem-fraction-static", "before": "0.88", "after": "0.92"}


@pytest.fixture
def hook() -> Any:
    receiver = Hook()
    yield receiver
    receiver.close()


def _relaunch() -> bytes:
    """The same launch started again an hour later (its lines' times an hour on) with --mem-fraction-static
    0.92."""
    data = READY.read_bytes().replace(b"mem_fraction_static=0.88", b"mem_fraction_static=0.92")
    return data.replace(b"2025-01-23 19:", b"2025-01-23 20:")


def _history_text(state: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", "L", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _check(hook: Hook, status: dict[str, Any], state: Path) -> None:
    """The relaunch (#2) is compared with #1 everywhere: /status, the ready alert, `history`."""
    assert (status["state"], status["incarnation"]) == ("ready", 2)
    changes = status["changes"]
    assert changes["since_incarnation"] == 1
    assert changes["arguments"] == [CHANGED]
    assert [p["phase"] for p in changes["phases"]][:2] == ["starting", "loading_weights"]
    assert changes["time_to_ready"]["before_seconds"] == changes["time_to_ready"]["after_seconds"] == 38.0
    assert "arguments" not in status  # the whole dump stays out of /status
    ready = hook.body("L/2/ready")
    assert ready["changed"].startswith("changed since #1: --mem-fraction-static 0.88 -> 0.92")
    assert "--mem-fraction-static 0.88 -> 0.92" in ready["text"]
    assert hook.body("L/1/ready")["changed"] == ""  # a first launch has nothing to compare with
    table = _history_text(state)
    (row,) = [line for line in table.splitlines() if line.strip().startswith("--mem-fraction-static")]
    assert row.split()[1:] == ["0.88", "->", "0.92"]  # in the relaunch's column (the newest is the first)


def test_a_relaunch_while_the_daemon_runs_names_the_changed_flag(tmp_path: Path, hook: Hook) -> None:
    """The log is replaced by a relaunch with one changed flag while the daemon follows it: /status, the ready
    alert and `history` name that flag, 0.88 -> 0.92, and nothing else of its arguments."""
    log = tmp_path / "L.log"
    log.write_bytes(READY.read_bytes())
    daemon = DaemonProcess(_config(tmp_path, hook, {"L": log}), deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        hook.wait_for("L/1/ready")
        fresh = log.with_suffix(".new")
        fresh.write_bytes(_relaunch())
        os.replace(fresh, log)
        hook.wait_for("L/2/ready")
        status = get(url + "status").json()[0]
        daemon.stop()
    finally:
        daemon.close()
    _check(hook, status, tmp_path / "state")


def test_a_relaunch_while_the_daemon_was_down_is_compared_from_the_store(tmp_path: Path, hook: Hook) -> None:
    """The daemon stops after the first launch was ready; the log is truncated and rewritten as a relaunch with
    one changed flag; the daemon started again compares the relaunch with the launch before as its state file
    kept it."""
    log = tmp_path / "L.log"
    log.write_bytes(READY.read_bytes())
    config = _config(tmp_path, hook, {"L": log})
    first = DaemonProcess(config, deadline=DEADLINE)
    try:
        hook.wait_for("L/1/ready")
        first.wait(event="alert delivered", notifier="hook", key="L/1/ready")
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(timeout=DEADLINE) == 0
    finally:
        first.close()
    log.write_bytes(_relaunch())  # in place: the same inode, truncated and written again
    second = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = second.wait(event="http_listening")["url"]
        hook.wait_for("L/2/ready")
        status = get(url + "status").json()[0]
        second.stop()
    finally:
        second.close()
    _check(hook, status, tmp_path / "state")
