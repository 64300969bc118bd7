"""Durable state: per launch and incarnation the state, transitions, facts and verdicts (SQLite).

One file, `<state_dir>/watchdog.sqlite3`, in WAL mode with `synchronous=NORMAL`: a commit survives the daemon
being killed (`kill -9`); only a power loss may take back the last commits, never corrupt the file. One
connection, used by one call at a time: every public method is a coroutine that holds a lock and runs the
blocking sqlite call in a worker thread (`anyio.to_thread.run_sync`), so the event loop never waits on disk.
While `write_behind` runs (the daemon runs it), transitions are written in batches, a few a commit.

What it keeps, and why:

- the state, the transitions (state, line, log time, reason, wall time), the facts and the verdict object, so
  that `watchdog history` can put two launches side by side;
- per verdict, whether it was announced: after a restart a verdict already announced is not announced again
  (`record_verdict` says so), and one saved but not announced (the daemon died in between) is announced then;
- silences (issue 9): a launch's alerts held until a wall time;
- the problems said and not resolved yet (a crash, a stall, an outage), written in the same transaction as
  their alerts' outbox rows and the verdict's announcement (`watchdog.alerts.outbox.Notes`): a restarted
  daemon resolves each once, whether its launch was relaunched or removed from the config while it was down;
- per launch, one checkpoint (`watchdog.follow.checkpoint`): the follower's analysis at a byte offset, so that a
  restarted daemon resumes reading there instead of at the log's start. The store keeps the blob as it is
  given (at most `MAX_CHECKPOINT_BYTES`); the follower decides when to write it (every few seconds while the
  log grows, soon after a transition, and when it stops) and whether to trust it;
- the alert outbox (`watchdog.alerts.outbox`), on a connection of its own made by `connect`.

The directory is made 0700 and the files 0600 whatever the umask; `lock_state_dir` keeps a second daemon off
the directory; a file with a table missing or damaged pages (`PRAGMA quick_check`) is refused at the start
(`ConfigError`, exit 78), and a row that does not decode is left out of the history with one warning.

A write that meets a passing fault (`passing`: another process's lock past `BUSY_TIMEOUT`, a full disk, an
I/O error) loses nothing that matters: verdicts, announcements, transitions and checkpoints are kept and
written again every `RETRY_SECONDS` (by `write_behind`, or before the next call), `failing` says why
meanwhile (for /healthz), and a verdict that cannot be written is still answered (whether it was announced is
read: a read works under a lock and on a full disk).

Growth is bounded: at most `MAX_INCARNATIONS_PER_LAUNCH` incarnations per launch (older ones are pruned with
their transitions and verdicts) and `MAX_TRANSITIONS_PER_INCARNATION` transitions per incarnation (later ones
are not stored; the incarnation's state and verdict are still kept up to date).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import anyio.to_thread
import structlog
from anyio.abc import TaskStatus

from watchdog.core.durations import plausible
from watchdog.core.verdict import Status, Verdict
from watchdog.exceptions import ConfigError, UsageError
from watchdog.vocabulary import (
    DEFAULT_STATE_DIR,
    LEGACY_STATE_DIR,
    MAX_INCARNATIONS_PER_LAUNCH,
    SETTLED_STATES,
    UNBEGUN_STATES,
)

__all__ = [
    "DB_NAME",
    "LOCK_NAME",
    "MAX_CHECKPOINT_BYTES",
    "MAX_INCARNATIONS_PER_LAUNCH",
    "MAX_TRANSITIONS_PER_INCARNATION",
    "MIGRATIONS",
    "IncarnationRecord",
    "StateDirLock",
    "StateStore",
    "TransitionRecord",
    "connect",
    "db_path",
    "lock_state_dir",
    "open_store",
    "passing",
    "refuse_legacy_state",
    "transaction",
]

DB_NAME = "watchdog.sqlite3"
LOCK_NAME = "watchdog.lock"  # held (flock) by the one daemon that uses the state directory; holds its pid
# SQLite's files beside the state file (made with the state file's mode, which is 0600)
_SIDE_FILES = ("-wal", "-shm", "-journal")
MAX_TRANSITIONS_PER_INCARNATION = 200  # a launch that stalls and resumes forever stops adding rows here
# With `write_behind` running: seconds a transition's snapshot may wait, to be written with the others of that
# moment in one trip to the worker thread and one commit (a later snapshot of the same incarnation replaces it)
TRANSITION_BATCH_DELAY = 0.25
MAX_CHECKPOINT_BYTES = 1 << 20  # a launch's checkpoint (typically 10-50 KB); a bigger one is not written
BUSY_TIMEOUT = 10.0  # seconds a write waits for another process's write (e.g. `history` reading)
# While writes fail (a full disk, the file locked by another process past BUSY_TIMEOUT): seconds a write waits
# for the lock, so that what must not wait (a verdict, its alert) learns at once that it cannot be written;
# and seconds between attempts to write what waits
FAILING_BUSY_TIMEOUT = 0.2
RETRY_SECONDS = 2.0

_T = TypeVar("_T")

log = structlog.get_logger("watchdog.store")
_Entry = tuple[str, int | None, str | None, str]  # a timeline entry's identity: state, line, at, reason

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
)
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class TransitionRecord:
    """One stored timeline entry."""

    state: str
    line: int | None
    at: str | None  # the log's time of that line
    reason: str
    wall: float  # unix time
    duration: float | None  # seconds until the next entry, by the log's times (None: not known)

    def to_json(self) -> dict[str, Any]:
        """As in `watchdog history --json`."""
        out = {**asdict(self), "wall": _iso(self.wall)}
        out["duration_seconds"] = out.pop("duration")
        return out


@dataclass(frozen=True)
class IncarnationRecord:
    """One incarnation of a launch as the store has it, with its phase durations."""

    launch: str
    incarnation: int
    host: str
    engine: str | None
    state: str
    phase: str
    started_at: float  # unix time
    updated_at: float
    offset: int
    facts: dict[str, Any]
    progress: dict[str, Any]
    labels: dict[str, Any]
    verdict: dict[str, Any] | None
    transitions: tuple[TransitionRecord, ...]
    announced: tuple[str, ...]  # keys of the verdicts announced
    phase_durations: dict[str, float] = field(init=False)
    ongoing: str | None = field(init=False)  # the state whose time still runs, if not an outcome

    def __post_init__(self) -> None:
        durations, ongoing = _phase_durations(self.transitions)
        object.__setattr__(self, "phase_durations", durations)
        object.__setattr__(self, "ongoing", ongoing)

    @property
    def time_to_ready(self) -> float | None:
        """Seconds from start to ready: the verdict's own figure, else the sum of the startup phases; None where
        that is no duration (-7200 s, or decades, kept by a build that did not bound them: `plausible`)."""
        if self.verdict and isinstance(self.verdict.get("time_to_ready_seconds"), int | float):
            return plausible(float(self.verdict["time_to_ready_seconds"]))
        total = 0.0
        for t in self.transitions:
            if t.state == "ready":
                return total
            duration = plausible(t.duration)
            if duration is None:
                return None
            total += duration
        return None  # never ready

    def to_json(self) -> dict[str, Any]:
        """As in `watchdog history --json`."""
        return {
            "launch": self.launch,
            "incarnation": self.incarnation,
            "host": self.host,
            "engine": self.engine,
            "state": self.state,
            "phase": self.phase,
            "started_at": _iso(self.started_at),
            "updated_at": _iso(self.updated_at),
            "offset": self.offset,
            "phase_durations": self.phase_durations,
            "time_to_ready_seconds": self.time_to_ready,
            "facts": self.facts,
            "progress": self.progress,
            "labels": self.labels,
            "verdict": self.verdict,
            "announced": list(self.announced),
            "transitions": [t.to_json() for t in self.transitions],
        }


_SETTLED = frozenset(s.value for s in SETTLED_STATES)
_UNBEGUN = ", ".join(f"'{s.value}'" for s in UNBEGUN_STATES)  # SQL


def _phase_durations(transitions: tuple[TransitionRecord, ...]) -> tuple[dict[str, float], str | None]:
    """Seconds per state: each entry's duration as the core gave it (`watchdog.core.durations`), else the wall
    time to the next entry."""
    out: dict[str, float] = {}
    for i, t in enumerate(transitions):
        seconds = plausible(t.duration)  # a row of an older build may hold -7200 s or decades
        if seconds is None and i + 1 < len(transitions):
            seconds = max(0.0, transitions[i + 1].wall - t.wall)
        if seconds is not None:
            out[t.state] = round(out.get(t.state, 0.0) + seconds, 3)
    last = transitions[-1].state if transitions else None
    return out, (last if last is not None and last not in _SETTLED else None)


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _dumps(value: object) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


def _object(text: str) -> dict[str, Any]:
    """A stored JSON object. Raises ValueError (or TypeError) when the row holds something else."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {type(value).__name__}")
    return value


def db_path(state_dir: str | Path) -> Path:
    """The state file inside `state_dir`."""
    return Path(state_dir) / DB_NAME


class StateStore:
    """The daemon's durable state; see the module docstring. Make one with `await StateStore.open(dir)`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False) -> None:
        """Use `StateStore.open`: this takes a connection already set up."""
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self._lock = anyio.Lock()
        self._waiting = _Waiting()  # what waits to be written
        self._added = anyio.Event()  # something waits to be written
        self._write_behind = False
        self._closed = False
        self._unreadable: set[tuple[str, int]] = set()  # incarnations whose rows did not decode (said once)
        # Why the file cannot be written now (a full disk, a lock held by another process), None while it can:
        # what waits is kept and tried again every RETRY_SECONDS; /healthz says the store is failing.
        self.failing: str | None = None

    @classmethod
    async def open(cls, state_dir: str | Path, *, readonly: bool = False) -> StateStore:
        """Open (creating the directory and file, and migrating the schema) the store in `state_dir`.

        Args:
            state_dir: the daemon's `state_dir`; the file is `watchdog.sqlite3` in it.
            readonly: only read (for `watchdog history`): create nothing, migrate nothing.

        Raises:
            UsageError: `readonly` and there is no state file.
            ConfigError: the file is not a watchdog state file, is damaged, or a newer watchdog wrote it; or
                the default state directory has none while the one before the rename has one
                (`refuse_legacy_state`: no command starts an empty state there, `watchdog silence` neither).
        """
        path = db_path(state_dir)
        await anyio.to_thread.run_sync(refuse_legacy_state, state_dir)
        # damaged pages are looked for once, by the daemon's store (`watchdog history` only reads)
        # Shielded: a cancel while the thread opens the file would lose the connection it returns, unclosed.
        with anyio.CancelScope(shield=True):
            conn = await anyio.to_thread.run_sync(
                functools.partial(connect, path, readonly, check=not readonly)
            )
        return cls(conn, path, readonly=readonly)

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        async with self._lock:
            if self._closed:
                raise RuntimeError("the state store is closed")
            # Not abandoned on cancellation: the call finishes (and commits or rolls back) before the lock
            # is released, so the connection is never used by two threads at once.
            if not self._waiting:
                return await anyio.to_thread.run_sync(fn, *args)
            # what waits to be written goes first, in the same trip: what was recorded before this call is
            # stored before it, transitions before checkpoints (a checkpoint is never ahead of the transitions
            # it has seen)
            waiting, self._waiting = self._waiting, _Waiting()
            left: list[_Waiting] = []  # what could not be written (the call may fail after it)
            try:
                with anyio.CancelScope(shield=True):  # taken out of the buffer: written, whatever happens
                    result = await anyio.to_thread.run_sync(self._after_waiting, waiting, left, fn, args)
            finally:
                # the file cannot be written now: kept (behind what came since), tried again
                for kept in left:
                    for older, newer in zip(vars(kept).values(), vars(self._waiting).values(), strict=True):
                        older.update(newer)
                    self._waiting = kept
                    self._added.set()
            return result

    def _after_waiting(
        self, waiting: _Waiting, left: list[_Waiting], fn: Callable[..., _T], args: tuple[Any, ...]
    ) -> _T:
        try:  # one transaction, as a rule
            self._write(lambda: self._write_waiting(waiting))
        except Exception as exc:
            # a full disk, a lock held past the busy timeout: all is kept for later; else each part in its own
            # transaction, so that one that fails does not take the others with it
            kept = waiting if passing(exc) else self._write_parts(waiting)
            if kept is not None:
                left.append(kept)
        return fn(*args)

    def _write_parts(self, waiting: _Waiting) -> _Waiting | None:
        left = _Waiting()
        try:
            self._write(lambda: self._record_all(waiting.snapshots))
        except Exception as exc:  # the call that follows is still made; only these snapshots are lost
            if passing(exc):
                left.snapshots.update(waiting.snapshots)
            else:
                log.warning("transitions not stored", launches=len(waiting.snapshots), error=repr(exc))
        try:
            self._write(lambda: self._put_checkpoints(waiting.checkpoints))
        except Exception as exc:  # their launches resume from the checkpoints before them
            if passing(exc):
                left.checkpoints.update(waiting.checkpoints)
            else:
                log.warning("checkpoints not stored", launches=len(waiting.checkpoints), error=repr(exc))
        try:
            self._write(lambda: self._put_verdicts(waiting.verdicts, waiting.marks))
        except Exception as exc:
            if passing(exc):
                left.verdicts.update(waiting.verdicts)
                left.marks.update(waiting.marks)
            else:
                log.warning("verdicts not stored", verdicts=len(waiting.verdicts), error=repr(exc))
        return left or None

    def _write_waiting(self, waiting: _Waiting) -> None:
        self._record_all(waiting.snapshots)
        self._put_checkpoints(waiting.checkpoints)
        self._put_verdicts(waiting.verdicts, waiting.marks)

    def _record_all(self, snapshots: Mapping[tuple[str, int], tuple[Status, float]]) -> None:
        for (launch, incarnation), (status, wall) in snapshots.items():
            self._record(launch, incarnation, status, wall)

    async def write_behind(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """While this runs (a task of the daemon's), `record_transition` and `save_checkpoint` return at once, and
        what they were given is written together, within `TRANSITION_BATCH_DELAY`, or before the next other call
        (only the last snapshot of an incarnation, the last checkpoint of a launch: each stands for those before
        it); `close` writes what is left. A daemon killed meanwhile loses those rows only: its launches resume
        from a checkpoint written before them, and read their transitions again."""
        self._write_behind = True
        try:
            task_status.started()
            while True:
                await self._added.wait()
                await anyio.sleep(TRANSITION_BATCH_DELAY if self.failing is None else RETRY_SECONDS)
                self._added = anyio.Event()
                if self._waiting:
                    await self._run(_nothing)
        finally:
            self._write_behind = False

    def _write(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in one transaction (in the worker thread); keep `failing` up to date."""
        try:
            result = transaction(self._conn, fn)
        except Exception as exc:
            if passing(exc):
                if self.failing is None:
                    # said once per spell: what waits is tried again every RETRY_SECONDS, quietly
                    log.warning(
                        "state file cannot be written; keeping what waits and trying again",
                        path=str(self.path),
                        error=str(exc),
                    )
                    self._conn.execute(f"PRAGMA busy_timeout = {int(FAILING_BUSY_TIMEOUT * 1000)}")
                self.failing = str(exc)
            raise
        if self.failing is not None:
            self.failing = None
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
            log.info("state file written again", path=str(self.path))
        return result

    async def _execute(self, sql: str, parameters: tuple[Any, ...]) -> None:
        """One statement in a transaction of its own."""
        await self._run(lambda: self._write(lambda: self._conn.execute(sql, parameters)))

    async def flush(self) -> None:
        """Write what waits to be written (`write_behind`'s transitions and checkpoints)."""
        await self._run(_nothing)

    # -- transitions and verdicts --------------------------------------------------------------------------

    async def record_transition(self, launch: str, incarnation: int, status: Status) -> None:
        """Store a status snapshot (`LaunchFollower.status()` with the daemon's host, labels) after a transition.

        The timeline entries not stored yet are added (an entry already stored, e.g. read again after a
        restart, is not added twice); state, phase, facts and progress are replaced.
        """
        wall = time.time()
        if self._write_behind and not self._closed:
            # each snapshot holds the incarnation's whole timeline so far: the last one says what the others say
            self._waiting.snapshots[(launch, incarnation)] = (status, wall)
            self._added.set()
            return
        await self._run(lambda: self._write(lambda: self._record(launch, incarnation, status, wall)))

    def _record(self, launch: str, incarnation: int, status: Status, wall: float) -> None:
        row_id = self._row(launch, incarnation)
        self._update_row(row_id, status.verdict, wall, status.host, dict(status.labels))
        self._merge_timeline(row_id, status, wall)

    def _update_row(
        self,
        row_id: int,
        v: Verdict,
        wall: float,
        host: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        self._conn.execute(
            "UPDATE incarnations SET host = coalesce(?, host), engine = coalesce(?, engine),"
            " state = coalesce(?, state), phase = coalesce(?, phase), facts = ?, progress = ?,"
            " labels = coalesce(?, labels), updated_at = ? WHERE id = ?",
            (
                host,
                v.engine,
                v.state.value,
                v.phase.value,
                _dumps(dict(v.facts)),
                _dumps({p.name: {"done": p.done, "total": p.total} for p in v.progress}),
                _dumps(labels) if labels is not None else None,
                wall,
                row_id,
            ),
        )

    def _merge_timeline(self, row_id: int, status: Status, wall: float) -> None:
        timeline, elapsed = status.verdict.timeline, status.elapsed
        rows = self._conn.execute(
            "SELECT seq, state, line, at, reason, duration FROM transitions WHERE incarnation_id = ?"
            " ORDER BY seq",
            (row_id,),
        ).fetchall()
        # The k-th occurrence of an entry in the snapshot is the k-th stored occurrence of it: a stall that
        # comes back is a new entry, an entry read again after a restart is not.
        stored: dict[tuple[_Entry, int], tuple[int, float | None]] = {}
        seen: Counter[_Entry] = Counter()
        for seq, state, line, at, reason, duration in rows:
            key: _Entry = (state, line, at, reason)
            stored[(key, seen[key])] = (seq, duration)
            seen[key] += 1
        next_seq = rows[-1][0] + 1 if rows else 0
        occurrences: Counter[_Entry] = Counter()
        for item in timeline:
            entry: _Entry = (item.state.value, item.line, item.at, item.reason)
            nth = occurrences[entry]
            occurrences[entry] += 1
            duration = item.duration
            known = stored.get((entry, nth))
            if known is not None:
                seq, had = known
                if had is None and duration is not None:
                    self._conn.execute(
                        "UPDATE transitions SET duration = ? WHERE incarnation_id = ? AND seq = ?",
                        (duration, row_id, seq),
                    )
                continue
            if next_seq >= MAX_TRANSITIONS_PER_INCARNATION:
                continue
            at_wall = wall if elapsed is None else wall - max(0.0, elapsed - item.entered)
            self._conn.execute(
                "INSERT INTO transitions (incarnation_id, seq, state, line, at, reason, wall, duration)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row_id, next_seq, *entry, at_wall, duration),
            )
            next_seq += 1

    def _save_verdict(self, launch: str, incarnation: int, verdict: Verdict, wall: float) -> None:
        row_id = self._row(launch, incarnation)
        self._update_row(row_id, verdict, wall)
        text = _dumps(verdict.to_json())
        self._conn.execute("UPDATE incarnations SET verdict = ? WHERE id = ?", (text, row_id))

    async def record_verdict(self, launch: str, incarnation: int, verdict: Verdict, key: str) -> bool:
        """Store the verdict object as the incarnation's latest; whether the verdict `key` was announced
        already (before a restart, too). A verdict that cannot be written now (`failing`) is kept and written
        when the file allows; whether it was announced is then read (a read still works), else taken as not."""
        wall = time.time()

        def record() -> bool:
            self._write(lambda: self._save_verdict(launch, incarnation, verdict, wall))
            return self._announced(launch, incarnation, key)

        try:
            return await self._run(record)
        except Exception as exc:
            if not passing(exc):
                raise
        self._waiting.verdicts[(launch, incarnation)] = (verdict, wall)
        self._added.set()
        if (launch, incarnation, key) in self._waiting.marks:
            return True
        try:
            return await self._run(self._announced, launch, incarnation, key)
        except sqlite3.Error:
            return False  # said again rather than never

    async def mark_announced(self, launch: str, incarnation: int, verdict_key: str) -> None:
        """Note that this verdict was said (to every notifier it goes to); kept and written when the file
        allows if it cannot be written now."""
        mark = {(launch, incarnation, verdict_key): time.time()}
        try:
            await self._run(self._write, lambda: self._put_verdicts({}, mark))
        except Exception as exc:
            if not passing(exc):
                raise
            self._waiting.marks.update(mark)
            self._added.set()

    def _put_verdicts(
        self,
        verdicts: Mapping[tuple[str, int], tuple[Verdict, float]],
        marks: Mapping[tuple[str, int, str], float],
    ) -> None:
        for (launch, incarnation), (verdict, wall) in verdicts.items():
            self._save_verdict(launch, incarnation, verdict, wall)
        for (launch, incarnation, key), wall in marks.items():
            self._conn.execute(
                "INSERT INTO verdicts (incarnation_id, key, announced_at) VALUES (?, ?, ?)"
                " ON CONFLICT (incarnation_id, key) DO UPDATE SET announced_at = excluded.announced_at",
                (self._row(launch, incarnation), key, wall),
            )

    def _announced(self, launch: str, incarnation: int, verdict_key: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM verdicts v JOIN incarnations i ON i.id = v.incarnation_id"
            " WHERE i.launch = ? AND i.incarnation = ? AND v.key = ? AND v.announced_at IS NOT NULL",
            (launch, incarnation, verdict_key),
        ).fetchone()
        return row is not None

    # -- history -------------------------------------------------------------------------------------------

    async def last_incarnations(self, launch: str | None = None) -> dict[str, tuple[int, bool]]:
        """Each launch's (or this one's) highest incarnation number, and whether that one began (a log that
        never came has a `pending` incarnation, which a restarted daemon goes on with): a relaunch is numbered
        on from it."""

        def select() -> dict[str, tuple[int, bool]]:
            rows = self._conn.execute(
                "SELECT i.launch, i.incarnation, EXISTS (SELECT 1 FROM transitions t WHERE t.incarnation_id = i.id"  # noqa: S608 - _UNBEGUN: the vocabulary's words
                f" AND t.state NOT IN ({_UNBEGUN})) FROM incarnations i JOIN (SELECT launch,"
                " max(incarnation) AS last FROM incarnations WHERE ? IS NULL OR launch = ? GROUP BY launch) m"
                " ON m.launch = i.launch AND m.last = i.incarnation",
                (launch, launch),
            ).fetchall()
            return {str(name): (int(number), bool(began)) for name, number, began in rows}

        return await self._run(select)

    async def history(self, launch: str | None = None, limit: int = 50) -> list[IncarnationRecord]:
        """Incarnations newest first (by when the store first heard of them), of one launch or all."""
        return await self._run(self._history, launch, limit)

    def _history(self, launch: str | None, limit: int) -> list[IncarnationRecord]:
        rows = self._conn.execute(
            "SELECT id, launch, incarnation, host, engine, state, phase, started_at, updated_at,"
            " read_offset, facts, progress, labels, verdict FROM incarnations"
            " WHERE ? IS NULL OR launch = ? ORDER BY id DESC LIMIT ?",
            (launch, launch, max(0, limit)),
        ).fetchall()
        out = []
        for row in rows:
            transitions = tuple(
                TransitionRecord(*t)
                for t in self._conn.execute(
                    "SELECT state, line, at, reason, wall, duration FROM transitions"
                    " WHERE incarnation_id = ? ORDER BY seq",
                    (row[0],),
                )
            )
            announced = tuple(
                k
                for (k,) in self._conn.execute(
                    "SELECT key FROM verdicts WHERE incarnation_id = ? AND announced_at IS NOT NULL"
                    " ORDER BY announced_at",
                    (row[0],),
                )
            )
            try:
                record = IncarnationRecord(
                    launch=row[1],
                    incarnation=int(row[2]),
                    host=row[3],
                    engine=row[4],
                    state=row[5],
                    phase=row[6],
                    started_at=float(row[7]),
                    updated_at=float(row[8]),
                    offset=int(row[9]),
                    facts=_object(row[10]),
                    progress=_object(row[11]),
                    labels=_object(row[12]),
                    verdict=_object(row[13]) if row[13] is not None else None,
                    transitions=transitions,
                    announced=announced,
                )
            except (ValueError, TypeError) as exc:
                # A damaged row (written by hand, a bad disk) is left out of the history, said once: the
                # launch's expectations are learned from the others, and its follower runs.
                if (str(row[1]), row[2]) not in self._unreadable:
                    self._unreadable.add((str(row[1]), row[2]))
                    log.warning(
                        "state row unreadable; left out of the history",
                        path=str(self.path),
                        launch=row[1],
                        incarnation=row[2],
                        error=str(exc),
                    )
                continue
            out.append(record)
        return out

    # -- checkpoints -------------------------------------------------------------------------------------

    async def load_checkpoint(self, launch: str) -> bytes | None:
        """The launch's checkpoint blob, None if it has none."""
        row = await self._run(
            lambda: self._conn.execute("SELECT state FROM checkpoints WHERE launch = ?", (launch,)).fetchone()
        )
        return bytes(row[0]) if row is not None else None

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        """Keep `blob` (the follower's state at byte `offset`) as the launch's checkpoint, replacing the last
        (written within `TRANSITION_BATCH_DELAY` while `write_behind` runs, else before this returns).

        Raises:
            ValueError: `blob` is larger than `MAX_CHECKPOINT_BYTES`.
        """
        if len(blob) > MAX_CHECKPOINT_BYTES:
            raise ValueError(
                f"a checkpoint of {len(blob)} bytes is over the {MAX_CHECKPOINT_BYTES} bytes allowed"
            )
        wall = time.time()
        if self._write_behind and not self._closed:
            self._waiting.checkpoints[launch] = (offset, wall, blob)
            self._added.set()
            return
        await self._run(lambda: self._write(lambda: self._put_checkpoints({launch: (offset, wall, blob)})))

    def _put_checkpoints(self, checkpoints: Mapping[str, tuple[int, float, bytes]]) -> None:
        self._conn.executemany(
            "INSERT INTO checkpoints (launch, read_offset, saved_at, state) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (launch) DO UPDATE SET read_offset = excluded.read_offset,"
            " saved_at = excluded.saved_at, state = excluded.state",
            [(launch, offset, wall, blob) for launch, (offset, wall, blob) in checkpoints.items()],
        )

    # -- silences (issue 9) --------------------------------------------------------------------------------

    async def add_silence(self, launch: str, until: float) -> None:
        """Hold `launch`'s alerts until unix time `until` (replaces an earlier silence of it)."""
        await self._execute(
            "INSERT INTO silences (launch, until) VALUES (?, ?)"
            " ON CONFLICT (launch) DO UPDATE SET until = excluded.until",
            (launch, until),
        )

    async def remove_silence(self, launch: str) -> None:
        """End `launch`'s silence."""
        await self._execute("DELETE FROM silences WHERE launch = ?", (launch,))

    async def silences(self, now: float | None = None) -> dict[str, float]:
        """The silences still running at unix time `now` (default: now), by launch; expired ones are dropped."""
        at = time.time() if now is None else now

        def running() -> dict[str, float]:
            rows = self._conn.execute("SELECT launch, until FROM silences WHERE until > ?", (at,))
            return {name: float(until) for name, until in rows}

        def active() -> dict[str, float]:
            self._conn.execute("DELETE FROM silences WHERE until <= ?", (at,))
            return running()

        try:
            return await self._run(lambda: self._write(active))
        except Exception as exc:
            if not passing(exc):
                raise
        return await self._run(running)  # expired ones are dropped another time: an alert never waits on it

    # -- the rows ------------------------------------------------------------------------------------------

    def _row(self, launch: str, incarnation: int) -> int:
        """The id of the incarnation's row, made (and the launch's oldest pruned) if new. In a transaction."""
        row = self._conn.execute(
            "SELECT id FROM incarnations WHERE launch = ? AND incarnation = ?", (launch, incarnation)
        ).fetchone()
        if row is not None:
            return int(row[0])
        wall = time.time()
        cursor = self._conn.execute(
            "INSERT INTO incarnations (launch, incarnation, started_at, updated_at) VALUES (?, ?, ?, ?)",
            (launch, incarnation, wall, wall),
        )
        self._conn.execute(
            "DELETE FROM incarnations WHERE launch = ? AND id NOT IN"
            " (SELECT id FROM incarnations WHERE launch = ? ORDER BY id DESC LIMIT ?)",
            (launch, launch, MAX_INCARNATIONS_PER_LAUNCH),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def close(self) -> None:
        """Write what waits to be written and close the file."""
        if self._closed:
            return
        try:
            if self._waiting and not self.readonly:
                await self.flush()
                if self._waiting.verdicts or self._waiting.marks:
                    log.warning(
                        "verdicts not stored: the state file cannot be written",
                        verdicts=len(self._waiting.verdicts),
                        announced=len(self._waiting.marks),
                        error=self.failing,
                    )
        finally:
            with anyio.CancelScope(shield=True):  # closed even from a cancelled scope
                async with self._lock:
                    self._closed = True
                    await anyio.to_thread.run_sync(self._conn.close)


@asynccontextmanager
async def open_store(state_dir: str | Path, *, readonly: bool = False) -> AsyncIterator[StateStore]:
    """`StateStore.open(...)`, closed (what waits written) when the block is left."""
    store = await StateStore.open(state_dir, readonly=readonly)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


def _nothing() -> None:
    """A call that only writes what waits to be written (see `StateStore._run`)."""


@dataclass
class _Waiting:
    """What waits to be written (`write_behind`), or could not be written yet: see `StateStore._run`."""

    # (launch, incarnation) -> (status snapshot, wall time) of transitions not yet written (`write_behind`)
    snapshots: dict[tuple[str, int], tuple[Status, float]] = field(default_factory=dict)
    # launch -> (offset, wall time, blob) of the checkpoint saved last and not yet written (`write_behind`)
    checkpoints: dict[str, tuple[int, float, bytes]] = field(default_factory=dict)
    # (launch, incarnation) -> (verdict, wall time), and (launch, incarnation, key) -> wall time of the
    # verdicts and announcements that could not be written yet (tried again until they are: see `failing`)
    verdicts: dict[tuple[str, int], tuple[Verdict, float]] = field(default_factory=dict)
    marks: dict[tuple[str, int, str], float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(vars(self).values())


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
