"""The state file: its schema and migrations, its connection (private, WAL, checked), one write transaction,
which SQLite errors are passing faults, and the state directory's lock."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from watchdog.exceptions import ConfigError, UsageError
from watchdog.vocabulary import DEFAULT_STATE_DIR, LEGACY_STATE_DIR

__all__ = [
    "BUSY_TIMEOUT",
    "DB_NAME",
    "LOCK_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "StateDirLock",
    "connect",
    "db_path",
    "lock_state_dir",
    "passing",
    "refuse_legacy_state",
    "transaction",
]

# Each migration takes the schema from version i to i + 1; never edit one that has shipped, append.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE incarnations (
        id INTEGER PRIMARY KEY,
        launch TEXT NOT NULL,
        incarnation INTEGER NOT NULL,
        host TEXT NOT NULL DEFAULT '',
        engine TEXT,
        state TEXT NOT NULL DEFAULT 'pending',
        phase TEXT NOT NULL DEFAULT 'pending',
        started_at REAL NOT NULL,           -- unix time the store first heard of it
        updated_at REAL NOT NULL,
        read_offset INTEGER NOT NULL DEFAULT 0,
        facts TEXT NOT NULL DEFAULT '{}',
        progress TEXT NOT NULL DEFAULT '{}',
        labels TEXT NOT NULL DEFAULT '{}',
        verdict TEXT,                       -- the latest verdict object, JSON
        UNIQUE (launch, incarnation)
    );
    CREATE TABLE transitions (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        line INTEGER,
        at TEXT,
        reason TEXT NOT NULL DEFAULT '',
        wall REAL NOT NULL,                 -- unix time it happened (the follower's clock, anchored)
        duration REAL,                      -- seconds until the next entry, by the log's own times
        PRIMARY KEY (incarnation_id, seq)
    );
    CREATE TABLE verdicts (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        key TEXT NOT NULL,                  -- e.g. the verdict's state: ready, crashed, stalled
        verdict TEXT,
        saved_at REAL,
        announced_at REAL,
        PRIMARY KEY (incarnation_id, key)
    );
    CREATE TABLE silences (
        launch TEXT PRIMARY KEY,
        until REAL NOT NULL                 -- unix time
    );
    """,
    """
    CREATE TABLE checkpoints (
        launch TEXT PRIMARY KEY,
        read_offset INTEGER NOT NULL,       -- the byte offset of the log's current file the state is at
        saved_at REAL NOT NULL,             -- unix time
        state BLOB NOT NULL                 -- watchdog.follow.checkpoint's blob: header, file identity, pickled state
    );
    """,
    # the alert outbox (watchdog.alerts.outbox), which made this table itself before: kept if it is there
    """
    CREATE TABLE IF NOT EXISTS outbox (
        id INTEGER PRIMARY KEY,
        notifier TEXT NOT NULL,
        destination INTEGER NOT NULL,       -- index of the notifier's URL (0 for a notifier with one)
        key TEXT NOT NULL,                  -- the alert's dedup key, or a reminder's
        alert TEXT NOT NULL,                -- Alert.to_dict(), JSON: no URL, no secret
        created_at REAL NOT NULL,           -- unix time
        attempts INTEGER NOT NULL DEFAULT 0,
        next_try REAL NOT NULL,             -- unix time
        delivered_at REAL,
        failed_at REAL,
        error TEXT NOT NULL DEFAULT '',
        UNIQUE (notifier, destination, key)
    );
    """,
    # verdicts keeps the announcements only (the verdict object is the incarnation's `verdict`); rebuilt, as
    # DROP COLUMN needs SQLite 3.35
    """
    CREATE TABLE verdicts_announced (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        key TEXT NOT NULL,                  -- e.g. the verdict's state: ready, crashed, stalled
        announced_at REAL NOT NULL,         -- unix time
        PRIMARY KEY (incarnation_id, key)
    );
    INSERT INTO verdicts_announced (incarnation_id, key, announced_at)
        SELECT incarnation_id, key, announced_at FROM verdicts WHERE announced_at IS NOT NULL;
    DROP TABLE verdicts;
    ALTER TABLE verdicts_announced RENAME TO verdicts;
    """,
    # the problems said and not resolved yet (watchdog.alerts.outbox), written with their alerts' outbox rows
    # in one transaction: a restarted daemon resolves each once, as if it had never stopped
    """
    CREATE TABLE problems (
        launch TEXT NOT NULL,               -- the launch, or host:NAME for a host's outage
        kind TEXT NOT NULL,                 -- crashed, stalled, unreachable
        key TEXT NOT NULL,                  -- its outbox key (its resolution's is KEY/resolved)
        alert TEXT NOT NULL,                -- Alert.to_dict(), JSON: no URL, no secret
        notifiers TEXT NOT NULL,            -- JSON list: the notifiers it goes to, by name
        told TEXT NOT NULL,                 -- JSON list: those that heard it (they hear its resolution)
        opened_at REAL NOT NULL,            -- unix time
        PRIMARY KEY (launch, kind)
    );
    """,
    # the arguments each incarnation was started with, as its engine's dump said them (credentials redacted):
    # a relaunch is compared with the launch before, also after a restart of the daemon
    """
    ALTER TABLE incarnations ADD COLUMN arguments TEXT NOT NULL DEFAULT '[]';  -- [[name, flag, value], ...]
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

DB_NAME = "watchdog.sqlite3"
# SQLite's files beside the state file (made with the state file's mode, which is 0600)
_SIDE_FILES = ("-wal", "-shm", "-journal")
BUSY_TIMEOUT = 10.0  # seconds a write waits for another process's write (e.g. `history` reading)

_T = TypeVar("_T")


def db_path(state_dir: str | Path) -> Path:
    """The state file inside `state_dir`."""
    return Path(state_dir) / DB_NAME


# A write that meets one of these may succeed later: another process's lock, a full disk, an I/O error, a
# file system remounted read-only. What was to be written is kept and tried again; other errors are not
# passing (a bug, a damaged file): trying again would fail forever.
_PASSING = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
    }
)


def passing(exc: BaseException) -> bool:
    """Whether `exc` is a SQLite error a later attempt may not meet (a lock, a full disk, an I/O error)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and isinstance(code, int) and (code & 0xFF) in _PASSING


def connect(path: Path | None, readonly: bool = False, *, check: bool = False) -> sqlite3.Connection:
    """Open and set up a connection to the state file `path` (blocking: call it in a worker thread): WAL,
    synchronous=NORMAL, foreign keys, the schema migrated and every table of it there. `path` None: a database
    in memory, with the schema. A state directory made here is 0700, the state file and SQLite's files beside
    it 0600, whatever the umask. `check`: also `PRAGMA quick_check` (the daemon's store, once at its start).

    Raises:
        UsageError: `readonly` and there is no state file.
        ConfigError: the file is not a watchdog state file, is damaged, or a newer watchdog wrote it.
    """
    where = ":memory:" if path is None else str(path)
    if path is None:
        target, uri = where, False
    elif readonly:
        if not path.is_file():
            raise UsageError(f"no watchdog state at {where}: give the daemon's state_dir with --state-dir")
        target, uri = f"file:{quote(where)}?mode=ro", True
    else:
        _private(path)
        target, uri = where, False
    try:
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE), so a write never has to upgrade a read
        # lock and fail with "database is locked" under another process's write.
        conn = sqlite3.connect(
            target, uri=uri, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise ConfigError(where, "daemon.state_dir", f"cannot open the state file: {exc}") from exc
    try:
        _setup(conn, where, readonly)
        if path is not None:
            _check(conn, where, quick=check)
            if not readonly:
                _private_side_files(path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ConfigError(
            where, "daemon.state_dir", f"not a watchdog state file ({exc}): move it away"
        ) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _private(path: Path) -> None:
    # The state holds log lines (maybe secrets) and alerts: the directory made 0700, the file made (or left)
    # 0600 before SQLite opens it, so that its -wal and -shm, which SQLite makes with the file's mode, are too.
    try:
        os.close(_private_open(path))
    except OSError as exc:
        raise ConfigError(str(path), "daemon.state_dir", f"cannot create the state file: {exc}") from exc


def _private_open(path: Path) -> int:
    """A descriptor of `path`, made 0600 (and its directory 0700) if new, made 0600 if it was readable by
    others. Raises OSError."""
    if not path.parent.is_dir():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)  # whatever the umask (a directory that was there is the operator's)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    with contextlib.suppress(OSError):  # a file of another owner keeps its mode; SQLite says if it can't
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    return fd


def _private_side_files(path: Path) -> None:
    # made by an older watchdog (before the state file was 0600), or while it was not
    for suffix in _SIDE_FILES:
        side = path.with_name(path.name + suffix)
        with contextlib.suppress(OSError):  # not there (the usual -journal), or of another owner
            if side.stat().st_mode & 0o077:
                side.chmod(0o600)


@functools.cache
def _tables() -> frozenset[str]:
    """The tables of the current schema (those the migrations make, applied to an empty database)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _setup(conn, ":memory:", readonly=False)
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return frozenset(str(name) for (name,) in rows if not str(name).startswith("sqlite_"))


def _check(conn: sqlite3.Connection, where: str, *, quick: bool) -> None:
    # A table dropped, or pages damaged: refused at the start (exit 78, the file named) rather than failing
    # every launch's follower every few seconds for as long as the daemon runs.
    present = {str(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = sorted(_tables() - present)
    if missing:
        raise ConfigError(
            where,
            "daemon.state_dir",
            f"a damaged state file: its table{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            f" {'are' if len(missing) > 1 else 'is'} missing; move the file away (the daemon starts a new one)",
        )
    if quick:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise ConfigError(
                where,
                "daemon.state_dir",
                f"a damaged state file ({'; '.join(problems)}): move it away (the daemon starts a new one)",
            )


def _setup(conn: sqlite3.Connection, where: str, readonly: bool) -> None:
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    elif where != ":memory:":
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise ConfigError(
                where, "daemon.state_dir", f"SQLite cannot use WAL mode here (got {mode!r}): use a local disk"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    version = int(conn.execute("SELECT version FROM schema_version").fetchone()[0]) if has_table else 0
    if version > SCHEMA_VERSION:
        raise ConfigError(
            where,
            "daemon.state_dir",
            f"written by a newer watchdog (schema {version}, this one knows {SCHEMA_VERSION}): upgrade watchdog",
        )
    if readonly:
        if not has_table:
            raise UsageError(f"{where} is not a watchdog state file")
        if version < SCHEMA_VERSION:
            raise UsageError(f"{where} has an older schema ({version}): start the daemon once to upgrade it")
        return
    if version == SCHEMA_VERSION:
        return
    transaction(conn, lambda: _migrate(conn))


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    conn.execute(
        "INSERT INTO schema_version (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version)"
    )
    # Read again inside the transaction: another process may have migrated meanwhile.
    version = int(conn.execute("SELECT version FROM schema_version").fetchone()[0])
    for script in MIGRATIONS[version:]:
        # statement by statement: executescript would commit the open transaction first
        for statement in (s for s in script.split(";") if s.strip()):
            conn.execute(statement)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))


def transaction(conn: sqlite3.Connection, fn: Callable[[], _T]) -> _T:
    """Run `fn` in one write transaction of `conn` (BEGIN IMMEDIATE; rolled back if `fn` raises)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        conn.execute("COMMIT")
    except BaseException:
        # SQLite has rolled back already after some errors (SQLITE_FULL): a second ROLLBACK would hide the error
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


LOCK_NAME = "watchdog.lock"  # held (flock) by the one daemon that uses the state directory; holds its pid


class StateDirLock:
    """The lock one daemon holds on its state directory for as long as it runs (see `lock_state_dir`)."""

    def __init__(self, path: Path, fd: int) -> None:
        """Use `lock_state_dir`."""
        self.path = path
        self._fd: int | None = fd

    def __enter__(self) -> StateDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        """Let another daemon use the directory (the lock also goes when the process ends, however)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None


def refuse_legacy_state(
    state_dir: str | Path, *, default: str | Path = DEFAULT_STATE_DIR, legacy: str | Path = LEGACY_STATE_DIR
) -> None:
    """Refuse to start an empty state in the default directory while the old default holds a state file.

    The default `state_dir` was `/var/lib/watchdog` before the rename to llm-launch-watchdog. A daemon
    upgraded in place whose config leaves `state_dir` at the default would otherwise start a new, empty
    state beside the old one: its history, silences and checkpoints gone, and alerts waiting in its outbox
    never sent. Refused (exit 78, which the unit does not restart) rather than warned about, because a
    warning scrolls by in the journal while the new file takes over for good; the message says how to move
    the old state over. Nothing is refused once the new directory has its own state file.

    Raises:
        ConfigError: `state_dir` is `default`, which has no state file, and `legacy` has one (or cannot be
            looked into by this user, so may have one).
    """
    if os.path.normpath(state_dir) != os.path.normpath(default) or os.path.exists(db_path(default)):
        return
    old = db_path(legacy)
    move = (
        f"stop the old daemon, then as root: mkdir -p {default} && mv {old}* {default}/ && "
        f"chown -R llm-launch-watchdog:llm-launch-watchdog {default} (upgrade notes: CHANGELOG.md)"
    )
    try:
        os.stat(old)
    except (FileNotFoundError, NotADirectoryError):
        return
    except PermissionError:
        if not os.path.isdir(legacy):
            return
        raise ConfigError(
            str(default),
            "daemon.state_dir",
            f"no state file here, and {legacy} (the default state directory before the rename to "
            f"llm-launch-watchdog) cannot be looked into by this user: if it holds the old state, move it "
            f"over: {move}; if not, move {legacy} away",
        ) from None
    raise ConfigError(
        str(default),
        "daemon.state_dir",
        f"no state file here, but {old} holds the state of watchdog before the rename to llm-launch-watchdog "
        f"(its history, silences, checkpoints and unsent alerts): move it over: {move}; or, to start "
        f"afresh, move {legacy} away",
    )


def lock_state_dir(state_dir: str | Path) -> StateDirLock:
    """Take the state directory for this process (blocking; made 0700 if need be): an exclusive `flock` on
    `LOCK_NAME` in it, which then holds this process's pid. A lock left by a process that died is taken over
    (the kernel released it).

    Raises:
        ConfigError: another process holds it (its pid named), or the lock file cannot be made.
    """
    path = Path(state_dir) / LOCK_NAME
    where = str(path)
    try:
        fd = _private_open(path)
    except OSError as exc:
        raise ConfigError(where, "daemon.state_dir", f"cannot create the lock file: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise ConfigError(
                str(state_dir),
                "daemon.state_dir",
                f"another watchdog daemon (pid {holder}) uses this state directory: stop it first, or give"
                " this one a state_dir of its own",
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # a full disk, a quota: the directory's problem, said as one (exit 78)
            raise ConfigError(
                str(state_dir),
                "daemon.state_dir",
                f"cannot write in the state directory: {exc.strerror or exc}; free space there, or give the "
                "daemon another state_dir",
            ) from exc
    except BaseException:
        os.close(fd)
        raise
    return StateDirLock(path, fd)
