"""A connection to the state file: made private (0700/0600), set up (WAL), migrated and checked; one write
transaction; which SQLite errors are passing faults."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from watchdog.exceptions import ConfigError, UsageError
from watchdog.store.migrations import MIGRATIONS, SCHEMA_VERSION

__all__ = ["BUSY_TIMEOUT", "DB_NAME", "connect", "db_path", "passing", "transaction"]

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
