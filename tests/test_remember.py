"""Across restarts, reloads and relaunches, a running daemon says each thing once and resolves each problem once."""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess
from http_client import get
from snapshots import status_from_json, verdict_from_json

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.alerting import Alerting
from watchdog.alerts.outbox import Outbox
from watchdog.alerts.senders import ConsoleAlerts
from watchdog.store import StateStore

ROOT = Path(__file__).parent
CRASH = ROOT.parent / "examples" / "sglang-ep8-oom.log"  # SGLang, crashes allocating the KV cache
READY = ROOT / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 60.0  # an upper bound only: a daemon started under heavy load (two cores, load 12-19) once logged nothing in 25 s
# each test starts a daemon twice, each wait up to DEADLINE: past the default 60 s once in a loaded floors run (the
# second daemon's first event; 11-21 s alone)
pytestmark = pytest.mark.timeout(180)
ALL_KINDS = '["crashed", "stalled", "ready", "resolved", "replaced", "unreachable"]'


class Hook:
    """A real webhook receiver in a thread: records each delivery's body; `wait_for` keys with a deadline."""

    def __init__(self) -> None:
        import http.server  # noqa: PLC0415

        self.bodies: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook._cond:
                    hook.bodies.append(body)
                    hook._cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> list[str]:
        """The dedup keys received, in order."""
        with self._cond:
            return [b["dedup_key"] for b in self.bodies]

    def wait_for(self, *keys: str, deadline: float = DEADLINE) -> None:
        """Wait until each of `keys` has been received."""
        end = time.monotonic() + deadline
        with self._cond:
            while not set(keys) <= {b["dedup_key"] for b in self.bodies}:
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not received: {set(keys) - set(self.keys())}; got {self.keys()}")
                self._cond.wait(left)

    def body(self, key: str) -> dict[str, Any]:
        """The body received with this key."""
        return next(b for b in self.bodies if b["dedup_key"] == key)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Any:
    receiver = Hook()
    yield receiver
    receiver.close()


def _config(tmp_path: Path, hook: Hook, launches: dict[str, Path], extra: str = "") -> Path:
    config = tmp_path / "watchdog.toml"
    text = f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "json"

[notifiers.hook]
kind = "webhook"
url = "{hook.url}"
on = {ALL_KINDS}
"""
    for name, log in launches.items():
        text += f'\n[launches.{name}]\nlog = "{log}"\nnotify = ["hook"]\n{extra}'
    config.write_text(text)
    return config


def _stop(daemon: DaemonProcess, how: str) -> None:
    """Stop the daemon: SIGTERM (graceful) or SIGKILL (no chance to write anything more)."""
    daemon.proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGTERM)
    daemon.proc.wait(timeout=DEADLINE)
    daemon.close()


def _replace(log: Path, data: bytes) -> None:
    """The file at `log` replaced by a new one (another inode) holding `data`."""
    fresh = log.with_suffix(".new")
    fresh.write_bytes(data)
    os.replace(fresh, log)


def _delivered(daemon: DaemonProcess, *keys: str) -> None:
    """Wait until the daemon noted each key delivered (so that a kill -9 does not make it send one again)."""
    for key in keys:
        daemon.wait(event="alert delivered", notifier="hook", key=key)


def _history(state: Path, launch: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", launch, "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(json.loads(out), key=lambda r: r["incarnation"])


@pytest.mark.parametrize("how", ["SIGTERM", "kill -9"])
@pytest.mark.parametrize("step", ["truncated", "replaced", "new start in the same file", "mid-relaunch"])
def test_a_relaunch_while_the_daemon_is_down_is_the_next_incarnation(
    tmp_path: Path, hook: Hook, how: str, step: str
) -> None:
    """L crashes (#1), is relaunched and crashes again (#2); the daemon stops (at each step of a third start)
    and the server is relaunched while it is down: the restarted daemon numbers the new start #3, resolves
    #2's crash, says #3's start and its ready once each, and the store keeps three rows as they were."""
    log = tmp_path / "L.log"
    config = _config(tmp_path, hook, {"L": log})
    log.write_bytes(CRASH.read_bytes())
    first = DaemonProcess(config, deadline=DEADLINE)
    try:
        hook.wait_for("L/1/crashed")
        _replace(log, b"relaunched\n" + CRASH.read_bytes())
        hook.wait_for("L/1/crashed/resolved", "L/2/replaced", "L/2/crashed")
        ready = READY.read_bytes()
        half = ready.index(b"\n", len(ready) // 3) + 1
        if step == "mid-relaunch":  # the third start has begun when the daemon stops
            _replace(log, ready[:half])
            hook.wait_for("L/2/crashed/resolved", "L/3/replaced")
        keys = hook.keys()
        _delivered(first, *keys)
    finally:
        _stop(first, how)
    if step == "truncated":
        log.write_bytes(ready)  # in place: the same inode, shorter
    elif step == "replaced":
        _replace(log, ready)
    elif step == "new start in the same file":
        with log.open("ab") as f:
            f.write(ready)
    else:
        with log.open("ab") as f:
            f.write(ready[half:])
    second = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = second.wait(event="http_listening")["url"]
        hook.wait_for("L/2/crashed/resolved", "L/3/replaced", "L/3/ready")
        status = get(url + "status").json()[0]
        second.stop()
    finally:
        second.close()
    said = Counter(hook.keys())
    assert said == Counter(
        [
            "L/1/crashed",
            "L/1/crashed/resolved",
            "L/2/replaced",
            "L/2/crashed",
            "L/2/crashed/resolved",
            "L/3/replaced",
            "L/3/ready",
        ]
    ), said
    assert "a new start (#3) began" in hook.body("L/2/crashed/resolved")["detail"]
    assert (status["state"], status["incarnation"], status["incarnations"]) == ("ready", 3, 3)
    rows = _history(tmp_path / "state", "L")
    assert [(r["incarnation"], r["state"]) for r in rows] == [(1, "crashed"), (2, "crashed"), (3, "ready")]


@pytest.mark.parametrize("how", ["SIGTERM", "kill -9"])
def test_a_stall_of_a_log_that_never_came_is_not_said_again_after_a_restart(
    tmp_path: Path, hook: Hook, how: str
) -> None:
    """A launch added by SIGHUP whose log does not exist stalls and is said; the daemon stops and starts again:
    the stall is not said again, and when the log comes it is resolved once."""
    first_log, late = tmp_path / "first.log", tmp_path / "late.log"
    first_log.write_bytes(READY.read_bytes())
    config = _config(tmp_path, hook, {"first": first_log}, extra='stall_after = "2s"\n')
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        daemon.wait(event="announced", launch="first", state="ready")
        config.write_text(config.read_text() + f'\n[launches.late]\nlog = "{late}"\nnotify = ["hook"]\n')
        config.write_text(config.read_text() + 'stall_after = "2s"\n')
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait(event="reloaded", added=["late"], removed=[], restarted=[])
        hook.wait_for("late/1/stalled")
        _delivered(daemon, "late/1/stalled")
    finally:
        _stop(daemon, how)
    again = DaemonProcess(config, deadline=DEADLINE)
    try:
        again.wait(event="already announced", launch="late", state="stalled", incarnation=1)
        late.write_bytes(READY.read_bytes())
        hook.wait_for("late/1/stalled/resolved", "late/1/ready")
        again.stop()
    finally:
        again.close()
    said = Counter(hook.keys())
    assert said["late/1/stalled"] == 1
    assert said["late/1/stalled/resolved"] == 1


@pytest.mark.parametrize("when", ["by a reload", "while the daemon was down"])
def test_a_launch_removed_from_the_configuration_has_its_problem_resolved_once(
    tmp_path: Path, hook: Hook, when: str
) -> None:
    """A crashed launch removed from the config (by SIGHUP, or while the daemon was down; a rename is a removal
    and an addition): its crash is resolved once, "removed from the configuration"; the new name is followed."""
    old, other = tmp_path / "old.log", tmp_path / "other.log"
    old.write_bytes(CRASH.read_bytes())
    other.write_bytes(READY.read_bytes())
    config = _config(tmp_path, hook, {"old": old, "other": other})
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        hook.wait_for("old/1/crashed", "other/1/ready")
        _delivered(daemon, "old/1/crashed")
        renamed = config.read_text().replace("[launches.old]", "[launches.renamed]")
        config.write_text(renamed)
        if when == "by a reload":
            daemon.proc.send_signal(signal.SIGHUP)
            daemon.wait(event="reloaded", added=["renamed"], removed=["old"], restarted=[])
        else:
            daemon.stop()
            daemon.close()
            daemon = DaemonProcess(config, deadline=DEADLINE)
        hook.wait_for("old/1/crashed/resolved", "renamed/1/crashed")
        daemon.stop()
    finally:
        daemon.close()
    said = Counter(hook.keys())
    assert said["old/1/crashed/resolved"] == 1
    assert said["old/1/crashed"] == 1
    assert hook.body("old/1/crashed/resolved")["detail"] == "removed from the configuration"
    assert said["other/1/ready"] == 1  # the launch left alone is not said again


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_announcement_is_written_with_its_outbox_rows(tmp_path: Path) -> None:
    """The moment an alert's outbox rows are in the state file, so are its verdict's announcement and its open
    problem: no death of the daemon between the two can say it again or lose its resolution."""
    store = await StateStore.open(tmp_path)
    outbox = await Outbox.open(store.path)
    try:
        await store.record_verdict(
            "L", 1, verdict_from_json({"state": "crashed", "incarnation": 1}), "crashed"
        )
        alerting = Alerting(outbox)
        alert = Alert.from_status(
            AlertKind.CRASHED,
            status_from_json({"name": "L", "state": "crashed", "phase": "starting", "incarnation": 1}),
        )
        noted = await alerting.say(alert, [ConsoleAlerts(out=io.StringIO())], announce=("L", 1, "crashed"))
        assert noted
        look = sqlite3.connect(store.path)
        try:
            outboxed = look.execute("SELECT key FROM outbox").fetchall()
            announced = look.execute("SELECT key FROM verdicts").fetchall()
            problems = look.execute("SELECT launch, kind, key FROM problems").fetchall()
        finally:
            look.close()
        assert outboxed == [("L/1/crashed",)]
        assert announced == [("crashed",)]
        assert problems == [("L", "crashed", "L/1/crashed")]
        await alerting.resolve("L", [AlertKind.CRASHED], "done")
        look = sqlite3.connect(store.path)
        try:
            assert look.execute("SELECT count(*) FROM problems").fetchone() == (0,)
            assert ("L/1/crashed/resolved",) in look.execute("SELECT key FROM outbox").fetchall()
        finally:
            look.close()
    finally:
        await outbox.close()
        await store.close()


def test_a_log_that_never_comes_is_said_by_name_in_status_and_alert(tmp_path: Path, hook: Hook) -> None:
    """A launch whose log does not exist: /status keeps it `pending` with a note naming the file (also past
    stall_after), the alert names the file and not a phase or a time since start, and the file appearing
    starts the launch and resolves the alert."""
    never = tmp_path / "typo.log"
    config = _config(tmp_path, hook, {"typo": never}, extra='stall_after = "1s"\n')
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        hook.wait_for("typo/1/stalled")
        status = get(url + "status").json()[0]
        never.write_bytes(READY.read_bytes())
        hook.wait_for("typo/1/stalled/resolved", "typo/1/ready")
        daemon.stop()
    finally:
        daemon.close()
    assert (status["state"], status["phase"]) == ("pending", "pending")
    assert status["missing_log"]["path"] == str(never)
    assert status["missing_log"]["since"].endswith("Z")
    assert status["note"].startswith(f"{never} does not exist (yet)")
    alert = hook.body("typo/1/stalled")
    assert alert["title"].startswith(f"typo: log {never} does not exist after ")
    assert alert["missing_log"] == str(never)
    assert alert["summary"].startswith(f"{never} does not exist after ")
    assert alert["time_since_start_seconds"] is None
    assert "typo in the log's path" in alert["detail"]
    assert f"Log: {never}" in alert["text"]
    assert "Since start" not in alert["text"]
    assert "Phase:" not in alert["text"]
    resolved = hook.body("typo/1/stalled/resolved")
    assert resolved["title"] == "typo: missing log resolved"


def _first(daemon: DaemonProcess, want: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first log event for which `want` holds (already seen, or to come within the daemon's deadline)."""
    end = time.monotonic() + daemon.deadline
    for event in daemon.seen:
        if want(event):
            return event
    while (left := end - time.monotonic()) > 0:
        try:
            event = daemon.events.get(timeout=left)
        except queue.Empty:
            break
        daemon.seen.append(event)
        if want(event):
            return event
    raise AssertionError(f"no such event in {daemon.deadline}s; seen: {daemon.seen[-15:]}")


@pytest.mark.parametrize("how", ["SIGTERM", "kill -9"])
def test_a_crash_said_to_no_notifier_is_said_once_across_a_restart(tmp_path: Path, how: str) -> None:
    """With no notifier, a relaunch's crash (an incarnation born in the running daemon: its verdict and
    announcement wait for the store's next batch) is said once: a stopped daemon writes it before it exits, and
    the next one does not say it again. A daemon killed before that batch loses its rows (as it loses the
    transitions that wait with them): the next one reads the log again and says the crash it finds there, once.
    The store ends with that crash announced."""
    log = tmp_path / "L.log"
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n'
        f'\n[launches.L]\nlog = "{log}"\n'
    )
    log.write_bytes(CRASH.read_bytes())
    first = DaemonProcess(config, deadline=DEADLINE)
    try:
        first.wait(event="announced", launch="L", state="crashed", incarnation=1)
        _replace(log, b"relaunched\n" + CRASH.read_bytes())
        first.wait(event="announced", launch="L", state="crashed", incarnation=2)
    finally:
        _stop(first, how)
    second = DaemonProcess(config, deadline=DEADLINE)
    try:
        # the crash read again (from the checkpoint, or the log's start): announced, or found announced
        event = _first(
            second,
            lambda e: e.get("event") in {"announced", "already announced"} and e.get("state") == "crashed",
        )
        second.stop()
        second.wait(event="(ended)")
    finally:
        second.close()
    said = Counter(e["incarnation"] for e in second.seen if e.get("event") == "announced")
    assert all(n == 1 for n in said.values()), said
    rows = _history(tmp_path / "state", "L")
    assert (rows[-1]["incarnation"], rows[-1]["state"], rows[-1]["announced"]) == (
        event["incarnation"],
        "crashed",
        ["crashed"],
    )
    if how == "SIGTERM":  # everything written at the stop: the same incarnation, found announced
        assert (event["event"], event["incarnation"]) == ("already announced", 2)
        assert [(r["incarnation"], r["announced"]) for r in rows] == [(1, ["crashed"]), (2, ["crashed"])]
