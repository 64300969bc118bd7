"""The daemon's state directory under faults: its modes, a second daemon on it, a damaged file, a file that
cannot be written (another process's lock, a full disk), through real `watchdog run` processes."""

from __future__ import annotations

import json
import queue
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from watchdog.store import DB_NAME, LOCK_NAME

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0


class Daemon:
    """`watchdog run` in a subprocess (umask 022, as a login shell has it), its JSON log lines read as they
    come."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            umask=0o022,
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.text: list[str] = []
        assert self.proc.stderr is not None
        stderr = self.proc.stderr

        def read() -> None:
            for line in stderr:
                self.text.append(line)
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {"event": "text", "text": line}
                self.events.put(event if isinstance(event, dict) else {"event": "text", "text": line})
            self.events.put({"event": "(ended)"})

        threading.Thread(target=read, daemon=True).start()

    def wait(self, deadline: float = DEADLINE, **want: Any) -> dict[str, Any]:
        """The first log event with these fields (already seen, or to come within `deadline` seconds)."""
        for event in self.seen:
            if all(event.get(k) == v for k, v in want.items()):
                return event
        end = time.monotonic() + deadline
        while (left := end - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(event)
            if all(event.get(k) == v for k, v in want.items()):
                return event
        raise AssertionError(f"no event {want} in {deadline}s; seen: {self.seen[-15:]}")

    def stop(self) -> str:
        """SIGTERM, exit 0; its standard output."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=DEADLINE) == 0, "".join(self.text[-20:])
        assert self.proc.stdout is not None
        return self.proc.stdout.read()

    def close(self) -> None:
        """Kill it if it still runs, and close its pipes."""
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _config(tmp_path: Path, launches: str = "", notifiers: str = "") -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n'
        f'\n[notifiers.console]\nkind = "console"\n{notifiers}{launches}'
    )
    return config


def _launch(name: str, log: Path, notify: str = "console") -> str:
    return f'\n[launches.{name}]\nlog = "{log}"\nnotify = ["{notify}"]\n'


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- 1. modes --------------------------------------------------------------------------------------------


def test_the_state_directory_is_0700_and_its_files_0600_under_umask_022(tmp_path: Path) -> None:
    """A daemon run under umask 022 makes its state directory 0700 and every file in it (the SQLite file, its
    -wal and -shm, the lock file) 0600: log lines and alerts are not readable by other users."""
    log = tmp_path / "crash.log"
    daemon = Daemon(_config(tmp_path, _launch("early", log)))
    try:
        daemon.wait(event="http_listening")
        log.write_bytes(CRASH.read_bytes())
        daemon.wait(event="announced", launch="early", state="crashed")
        daemon.wait(event="alert delivered", key="early/1/crashed")
        state = tmp_path / "state"
        files = {p.name: _mode(p) for p in state.iterdir()}
        assert {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", LOCK_NAME} <= set(files)
        assert _mode(state) == 0o700
        assert files == dict.fromkeys(files, 0o600)
        daemon.stop()
    finally:
        daemon.close()


def test_a_state_file_left_readable_by_an_older_watchdog_is_made_0600(tmp_path: Path) -> None:
    """A state file and its -wal that an older watchdog left 0644 are 0600 once a daemon has opened them."""
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / DB_NAME) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE t (x)")
    db.close()
    for path in state.iterdir():
        path.chmod(0o644)
    daemon = Daemon(_config(tmp_path))
    try:
        daemon.wait(event="http_listening")
        assert {p.name: _mode(p) for p in state.iterdir() if _mode(p) != 0o600} == {}
        daemon.stop()
    finally:
        daemon.close()


# -- 2. one daemon per state directory ---------------------------------------------------------------------


def test_a_second_daemon_on_the_same_state_directory_refuses_naming_the_first(tmp_path: Path) -> None:
    """While a daemon runs, a second one on its state_dir exits 78 at once, naming the first's pid (and no
    traceback); a lock left by a daemon killed with SIGKILL is taken over by the next one."""
    config = _config(tmp_path, _launch("early", tmp_path / "crash.log"))
    first = Daemon(config)
    try:
        first.wait(event="http_listening")
        second = subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        assert second.returncode == 78, second.stderr
        assert f"another watchdog daemon (pid {first.proc.pid}) uses this state directory" in second.stderr
        assert "Traceback" not in second.stderr
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=DEADLINE)
    finally:
        first.close()
    assert (tmp_path / "state" / LOCK_NAME).read_text().strip() == str(first.proc.pid)  # stale
    third = Daemon(config)
    try:
        third.wait(event="http_listening")
        assert (tmp_path / "state" / LOCK_NAME).read_text().strip() == str(third.proc.pid)
        third.stop()
    finally:
        third.close()


# -- 3. a damaged state file -------------------------------------------------------------------------------


def _crashed_once(tmp_path: Path, log: Path) -> Path:
    """A daemon that saw `log` crash and announced it, then stopped; its config."""
    config = _config(tmp_path, _launch("early", log))
    log.write_bytes(CRASH.read_bytes())
    daemon = Daemon(config)
    try:
        daemon.wait(event="alert delivered", key="early/1/crashed")
        daemon.stop()
    finally:
        daemon.close()
    return config


def _damage(tmp_path: Path, sql: str) -> None:
    with sqlite3.connect(tmp_path / "state" / DB_NAME) as db:
        db.execute(sql)
    db.close()


def test_a_garbage_verdict_in_the_state_file_is_left_out_with_one_warning(tmp_path: Path) -> None:
    """A stored verdict that is not JSON (a damaged row) is left out of the launch's history with one warning
    naming it; the restarted daemon follows the launch (it does not stay pending while its follower fails)."""
    log = tmp_path / "crash.log"
    config = _crashed_once(tmp_path, log)
    _damage(tmp_path, "UPDATE incarnations SET verdict = 'garbage{' WHERE launch = 'early'")
    daemon = Daemon(config)
    try:
        daemon.wait(event="already announced", launch="early", state="crashed")
        warned = [e for e in daemon.seen if e.get("event") == "state row unreadable; left out of the history"]
        assert [(e["launch"], e["incarnation"]) for e in warned] == [("early", 1)]
        assert not [e for e in daemon.seen if e.get("event") == "launch follower failed"]
        daemon.stop()
    finally:
        daemon.close()


def test_a_state_file_with_a_table_dropped_is_refused_at_start(tmp_path: Path) -> None:
    """A state file whose `transitions` table was dropped: `watchdog run` exits 78 at once with one line that
    names the file and says to move it away, instead of running with every launch pending."""
    config = _crashed_once(tmp_path, tmp_path / "crash.log")
    _damage(tmp_path, "DROP TABLE transitions")
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert str(tmp_path / "state" / DB_NAME) in proc.stderr
    assert "table transitions is missing; move the file away" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_damaged_pages_are_refused_at_start(tmp_path: Path) -> None:
    """A state file whose pages were overwritten (a bad disk) fails `PRAGMA quick_check`: exit 78, the file
    named, move it away."""
    config = _crashed_once(tmp_path, tmp_path / "crash.log")
    path = tmp_path / "state" / DB_NAME
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'incarnations'").fetchone()[0]
    db.close()
    with path.open("r+b") as f:  # the table's root page: its b-tree header overwritten
        f.seek((root - 1) * page)
        f.write(b"\0" * 16)
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert str(path) in proc.stderr
    assert "move it away" in proc.stderr
    assert "Traceback" not in proc.stderr
