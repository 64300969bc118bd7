"""The daemon's state directory under faults: its modes, a second daemon on it, a damaged file, a file that
cannot be written (another process's lock, a full disk), through real `watchdog run` processes."""

from __future__ import annotations

import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import unavailable
from daemon_process import DaemonProcess
from http_receiver import Receiver
from snapshots import status_from_json
from structlog.testing import capture_logs

from watchdog.store import DB_NAME, LOCK_NAME

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 60.0  # a daemon process on a loaded machine takes seconds to import


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh needs the asyncio backend."""
    return "asyncio"


class Daemon(DaemonProcess):
    """`watchdog run` in a subprocess under umask 022, as a login shell has it."""

    def __init__(self, config: Path) -> None:
        super().__init__(config, deadline=DEADLINE, umask=0o022)


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


# -- 4. a state file that cannot be written ---------------------------------------------------------------


async def _serve(daemon: Any, *, task_status: Any) -> None:
    from watchdog.daemon.http import serve_http  # noqa: PLC0415

    await serve_http(
        ("127.0.0.1", 0), daemon.statuses, daemon.stats, health=daemon.health, task_status=task_status
    )


def _written(state: Path) -> tuple[list[tuple[str, bool]], list[str]]:
    """The outbox's rows (key, delivered) and the announced verdicts' keys, as another process sees them."""
    with sqlite3.connect(state / DB_NAME) as db:
        outbox = [
            (k, d is not None) for k, d in db.execute("SELECT key, delivered_at FROM outbox ORDER BY id")
        ]
        announced = [k for (k,) in db.execute("SELECT key FROM verdicts WHERE announced_at IS NOT NULL")]
    db.close()
    return outbox, announced


class _Lock:
    """Another process's write lock on the state file (`BEGIN EXCLUSIVE` on a connection of its own)."""

    def __init__(self, state: Path) -> None:
        self.db = sqlite3.connect(state / DB_NAME, isolation_level=None, check_same_thread=False)
        self.db.execute("BEGIN EXCLUSIVE")
        self.released = False

    def release(self) -> None:
        """Let the file be written again (once; a second call does nothing)."""
        if not self.released:
            self.released = True
            self.db.execute("ROLLBACK")
            self.db.close()


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["locked", "full"])
async def test_a_crash_is_alerted_when_the_state_file_cannot_be_written_and_stored_later(
    tmp_path: Path, receiver: Receiver, fault: str
) -> None:
    """While another process holds the state file's write lock (or the disk is full: SQLite's max_page_count),
    a crash still reaches a real webhook receiver, /healthz answers 503 "degraded"; once the file can be
    written, the outbox row (delivered) and the announcement are stored, /healthz is ok again, and a restarted
    daemon does not announce the crash twice."""
    import anyio  # noqa: PLC0415
    from http_client import Client  # noqa: PLC0415

    from watchdog.alerts.senders import ServiceNotifier  # noqa: PLC0415
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415
    from watchdog.store import open_store  # noqa: PLC0415

    state, log = tmp_path / "state", tmp_path / "crash.log"
    hook = ServiceNotifier(name="hook", kind="webhook", urls=(receiver.url(),), timeout=2.0)
    plans = {"early": LaunchPlan(LaunchSpec(name="early", target=parse_target(str(log))), alerts=(hook,))}

    async def limit(store: Any, daemon: Any, pages: int | None) -> None:
        # a full disk, as SQLite sees one: no page past the file's current count (per connection)
        for conn, run in ((store._conn, store._run), (daemon._outbox._conn, daemon._outbox._run)):
            count = (
                pages
                if pages is not None
                else await run(lambda c=conn: c.execute("PRAGMA page_count").fetchone()[0])
            )
            await run(lambda c=conn, n=count: c.execute(f"PRAGMA max_page_count = {n}"))

    async def wait_for(predicate: Any) -> None:
        with anyio.fail_after(DEADLINE):
            while True:  # another connection's view of the file (or the retries' result): polled
                if predicate():
                    break
                await anyio.sleep(0.05)

    with anyio.fail_after(3 * DEADLINE):
        async with open_store(state) as store, anyio.create_task_group() as tg:
            daemon = Daemon(plans, serve=_serve, store=store, handle_signals=False)
            await tg.start(daemon.run)
            base = f"http://127.0.0.1:{daemon.port}"
            lock = _Lock(state) if fault == "locked" else None
            if fault == "full":
                await limit(store, daemon, None)
            try:
                log.write_bytes(CRASH.read_bytes())
                [got] = await receiver.wait_for(1, deadline=DEADLINE)
                assert got.json()["dedup_key"] == "early/1/crashed"
                async with Client(base) as client:
                    health = await client.get("/healthz")
                assert (health.status_code, health.text[:9]) == (503, "degraded:")
                if lock is not None:
                    assert _written(state) == ([], [])
            finally:
                if lock is not None:
                    lock.release()
            if fault == "full":
                await limit(store, daemon, 1 << 30)  # the disk freed
            await wait_for(lambda: _written(state) == ([("early/1/crashed", True)], ["crashed"]))
            await wait_for(lambda: daemon.health() is None)
            async with Client(base) as client:
                assert (await client.get("/healthz")).text == "ok\n"
            tg.cancel_scope.cancel()
    with anyio.fail_after(DEADLINE):
        async with open_store(state) as store, anyio.create_task_group() as tg:
            with capture_logs() as logs:
                daemon = Daemon(plans, serve=_serve, store=store, handle_signals=False)
                await tg.start(daemon.run)
                await daemon.wait_until(lambda s: s[0]["state"] == "crashed")
                await wait_for(lambda: any(e["event"] == "already announced" for e in logs))
            tg.cancel_scope.cancel()
    assert len(receiver.delivered()) == 1


# -- 5. errors while pruning the outbox ------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_outbox_that_cannot_be_pruned_says_so_once_and_alerting_goes_on(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning the outbox while another process holds the file's write lock fails each hour: the first failure
    is logged (once for that kind of error, not every hour, not never), and alerts are still delivered."""
    import anyio  # noqa: PLC0415

    from watchdog.alerts import alerting as alerting_module  # noqa: PLC0415
    from watchdog.alerts.alerting import Alerting  # noqa: PLC0415
    from watchdog.alerts.notifiers import Alert, AlertKind  # noqa: PLC0415
    from watchdog.alerts.outbox import Outbox  # noqa: PLC0415
    from watchdog.alerts.senders import ServiceNotifier  # noqa: PLC0415
    from watchdog.store import open_store  # noqa: PLC0415

    monkeypatch.setattr(alerting_module, "PRUNE_EVERY_SECONDS", 0.01)
    attempts = 0
    second = anyio.Event()
    prune = Outbox.prune

    async def counted(self: Outbox, now: float) -> int:
        nonlocal attempts
        attempts += 1
        try:
            return await prune(self, now)
        finally:
            if attempts == 2:
                second.set()

    monkeypatch.setattr(Outbox, "prune", counted)
    hook = ServiceNotifier(name="hook", kind="webhook", urls=(receiver.url(),), timeout=2.0)
    status = {"name": "kimi", "engine": "sglang", "state": "crashed", "phase": "capturing_graphs"}
    async with open_store(tmp_path) as store:
        box = await Outbox.open(store.path)
        lock = _Lock(tmp_path)
        try:
            with capture_logs() as logs, anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    alerting = Alerting(box)
                    await tg.start(alerting.run)
                    await second.wait()
                    lock.release()
                    await alerting.say(Alert.from_status(AlertKind.CRASHED, status_from_json(status)), [hook])
                    await receiver.wait_for(1)
                    tg.cancel_scope.cancel()
        finally:
            lock.release()
            await box.close()
    warned = [e for e in logs if e["event"] == "outbox not pruned; trying again later"]
    assert len(warned) == 1
    assert "database is locked" in warned[0]["error"]


def test_a_state_directory_on_a_full_disk_at_the_first_start_is_exit_78(tmp_path: Path) -> None:
    """`watchdog run` whose state_dir is on a full file system (a real tmpfs, filled): exit 78 naming the
    directory and what to do, not 70 "internal error: OSError: [Errno 28]"."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True, check=False
    )
    # not root, or no CAP_SYS_ADMIN: a skip, or a failure where CI (root) sets WATCHDOG_REQUIRE_MOUNT=1
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}", "WATCHDOG_REQUIRE_MOUNT")
    try:
        # filled to its last byte (dd stops at ENOSPC)
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={disk / 'fill'}", "bs=4k"], capture_output=True, check=False
        )
        config = tmp_path / "watchdog.toml"
        config.write_text(f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{disk / "state"}"\n')
        run = subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    assert run.returncode == 78, run.stderr
    assert f"{disk / 'state'}: daemon.state_dir: cannot write in the state directory" in run.stderr
    assert "No space left on device" in run.stderr
