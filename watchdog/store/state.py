"""`StateStore`: the daemon's durable state, one call at a time in a worker thread; what waits to be written
(`write_behind`), written in batches and kept through passing faults (`failing`)."""

from __future__ import annotations

import functools
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import anyio
import anyio.to_thread
import structlog
from anyio.abc import TaskStatus

from watchdog.core.arguments import Argument
from watchdog.core.verdict import Status, Verdict
from watchdog.store.database import BUSY_TIMEOUT, connect, db_path, passing, refuse_legacy_state, transaction
from watchdog.store.records import IncarnationRecord, TransitionRecord, _arguments, _dumps, _object
from watchdog.vocabulary import MAX_INCARNATIONS_PER_LAUNCH, UNBEGUN_STATES

__all__ = [
    "FAILING_BUSY_TIMEOUT",
    "MAX_CHECKPOINT_BYTES",
    "MAX_TRANSITIONS_PER_INCARNATION",
    "RETRY_SECONDS",
    "TRANSITION_BATCH_DELAY",
    "StateStore",
    "open_store",
]

# With `write_behind` running: seconds a transition's snapshot may wait, to be written with the others of that
# moment in one trip to the worker thread and one commit (a later snapshot of the same incarnation replaces it).
# Each snapshot taken builds its incarnation's verdict: a second lets a relaunch's phases, a few tenths of a second
# apart, share one (a crash loop's startup: 1.3 snapshots an incarnation, not 2.3). Nothing waits on it: a verdict
# with an alert to say, and any read of the file, write what waits first (`_run`)
TRANSITION_BATCH_DELAY = 1.0
# While writes fail (a full disk, the file locked by another process past BUSY_TIMEOUT): seconds a write waits
# for the lock, so that what must not wait (a verdict, its alert) learns at once that it cannot be written;
# and seconds between attempts to write what waits
FAILING_BUSY_TIMEOUT = 0.2
RETRY_SECONDS = 2.0

MAX_CHECKPOINT_BYTES = 1 << 20  # a launch's checkpoint (typically 10-50 KB); a bigger one is not written
MAX_TRANSITIONS_PER_INCARNATION = 200  # a launch that stalls and resumes forever stops adding rows here

_T = TypeVar("_T")
# a transition's status snapshot, or what takes it: taken when its batch is written (`record_transition`)
_Snapshot = Status | Callable[[], Status]
_Entry = tuple[str, int | None, str | None, str]  # a timeline entry's identity: state, line, at, reason
_TimelineRow = tuple[int, _Entry, float | None]  # a stored timeline entry: seq, identity, duration
_UNBEGUN = ", ".join(f"'{s.value}'" for s in UNBEGUN_STATES)  # SQL

log = structlog.get_logger("watchdog.store")


class StateStore:
    """The daemon's durable state (docs/architecture.md, "The state store"); open with `StateStore.open(dir)`."""

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
        # What answers "announced already?" without a read (`record_verdict`): per launch, the highest
        # incarnation number the file held when `last_incarnations` was asked (with `_filed_all`, a launch not
        # in it had none), and the announcements of each incarnation above it, all made by this store's
        # process since (None: ask the file, its announcement written elsewhere); newest
        # MAX_INCARNATIONS_PER_LAUNCH a launch, an older one asked of the file again
        self._filed: dict[str, int] = {}
        self._filed_all = False
        self._said: dict[str, dict[int, set[str] | None]] = {}
        self._arguments: dict[str, tuple[tuple[Argument, ...], str]] = {}  # see `_arguments_text`
        # Per launch, the incarnation row written last: (incarnation, row id, its timeline rows as stored, None:
        # not read yet), so that a crash loop's every write does not ask the file for what it wrote itself (this
        # daemon is the file's one writer: `lock_state_dir`); forgotten when a transaction fails (rolled back)
        self._rows: dict[str, tuple[int, int, list[_TimelineRow] | None]] = {}
        # Why the file cannot be written now (a full disk, a lock held by another process), None while it can:
        # what waits is kept and tried again every RETRY_SECONDS; /healthz says the store is failing.
        self.failing: str | None = None

    @classmethod
    async def open(cls, state_dir: str | Path, *, readonly: bool = False) -> Self:
        """Open the store in `state_dir` (`watchdog.sqlite3` in it), creating the directory and file and
        migrating the schema, unless `readonly` (`watchdog history`: create nothing, migrate nothing).

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
            _take_snapshots(waiting.snapshots)
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

    def _parts(
        self, waiting: _Waiting, written: Callable[[str], bool] = lambda _: True
    ) -> tuple[tuple[str, tuple[str, ...], Callable[[], None]], ...]:
        # what waits, part by part: (its name, its fields of `_Waiting`, its writer), transitions first;
        # `written(part)`: whether a part before was (the verdicts rely on the snapshots written before them)
        return (
            ("transitions", ("snapshots",), lambda: self._record_all(waiting.snapshots)),
            ("checkpoints", ("checkpoints",), lambda: self._put_checkpoints(waiting.checkpoints)),
            (
                "verdicts",
                ("verdicts", "marks"),
                lambda: self._put_verdicts(
                    waiting.verdicts, waiting.marks, waiting.snapshots if written("transitions") else None
                ),
            ),
        )

    def _write_parts(self, waiting: _Waiting) -> _Waiting | None:
        # each part in a transaction of its own: one that fails for good is lost alone (its transitions are read
        # again, its launches resume from the checkpoints before them), one that meets a passing fault is kept
        left = _Waiting()
        failed: set[str] = set()
        for what, fields, write in self._parts(waiting, lambda part: part not in failed):
            try:
                self._write(write)
            except Exception as exc:
                failed.add(what)
                if not passing(exc):
                    log.warning(f"{what} not stored", count=len(getattr(waiting, fields[0])), error=repr(exc))
                for name in fields if passing(exc) else ():
                    getattr(left, name).update(getattr(waiting, name))
        return left or None

    def _write_waiting(self, waiting: _Waiting) -> None:
        for _, _, write in self._parts(waiting):
            write()

    def _record_all(self, snapshots: Mapping[tuple[str, int], tuple[_Snapshot, float]]) -> None:
        for (launch, incarnation), (status, wall) in snapshots.items():
            assert isinstance(status, Status)  # taken on the event loop (`_take_snapshots`)
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
            self._rows.clear()  # rolled back: what they say may not be in the file
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

    async def record_transition(self, launch: str, incarnation: int, status: _Snapshot) -> None:
        """Store a status snapshot of the incarnation (`LaunchFollower.status(incarnation)` with the daemon's
        host, labels) after a transition; or a function that takes it: then it is taken when the snapshot is
        written (with `write_behind`, once a batch however many transitions the incarnation had in it).

        The timeline entries not stored yet are added (an entry already stored, e.g. read again after a
        restart, is not added twice); state, phase, facts and progress are replaced.
        """
        wall = time.time()
        if self.record_transition_behind(launch, incarnation, status, wall):
            return
        taken = status if isinstance(status, Status) else status()
        await self._run(lambda: self._write(lambda: self._record(launch, incarnation, taken, wall)))

    def record_transition_behind(
        self, launch: str, incarnation: int, status: _Snapshot, wall: float | None = None
    ) -> bool:
        """`record_transition` where it returns at once (while `write_behind` runs), without a coroutine: whether
        it was taken (else `record_transition` writes it). `wall`: the Unix time of the transition (now)."""
        if not self._write_behind or self._closed:
            return False
        # each snapshot holds the incarnation's whole timeline so far: the last one says what the others say
        self._waiting.snapshots[(launch, incarnation)] = (status, time.time() if wall is None else wall)
        self._added.set()
        return True

    def stands_for(self, launch: str, incarnation: int, status: Callable[[], Status | None]) -> bool:
        """Let `status()` (of the incarnation, as new as every transition recorded of it: made of its verdict,
        built already) be the snapshot that waits to be taken of it, if one does (`write_behind`), and it gives
        one; whether it does."""
        waiting = self._waiting.snapshots.get((launch, incarnation))
        if waiting is None or isinstance(waiting[0], Status):
            return False
        taken = status()
        if taken is None:
            return False
        self._waiting.snapshots[(launch, incarnation)] = (taken, time.time())
        return True

    def _record(self, launch: str, incarnation: int, status: Status, wall: float) -> None:
        row_id = self._row(launch, incarnation)
        self._update_row(launch, row_id, status.verdict, wall, status.host, dict(status.labels))
        self._merge_timeline(launch, row_id, status, wall)

    def _update_row(
        self,
        launch: str,
        row_id: int,
        v: Verdict,
        wall: float,
        host: str | None = None,
        labels: dict[str, str] | None = None,
        verdict: str | None = None,
    ) -> None:
        self._conn.execute(
            "UPDATE incarnations SET host = coalesce(?, host), engine = coalesce(?, engine),"
            " state = coalesce(?, state), phase = coalesce(?, phase), facts = ?, progress = ?,"
            " labels = coalesce(?, labels), updated_at = ?, verdict = coalesce(?, verdict),"
            " arguments = CASE WHEN ? = '[]' THEN arguments ELSE ? END WHERE id = ?",
            (
                host,
                v.engine,
                v.state.value,
                v.phase.value,
                _dumps(dict(v.facts)),
                _dumps({p.name: {"done": p.done, "total": p.total} for p in v.progress}),
                _dumps(labels) if labels is not None else None,
                wall,
                verdict,
                arguments := self._arguments_text(launch, v.arguments),
                arguments,
                row_id,
            ),
        )

    def _arguments_text(self, launch: str, arguments: tuple[Argument, ...]) -> str:
        # an incarnation's arguments (SGLang's dump: ~150, 6 KB of JSON) are the same tuple in each of its
        # snapshots and its verdict: encoded once (the launch's last ones kept, the tuple alive with its text)
        last = self._arguments.get(launch)
        if last is not None and last[0] is arguments:
            return last[1]
        text = _dumps([[a.name, a.flag, a.value] for a in arguments])
        self._arguments[launch] = (arguments, text)
        return text

    def _merge_timeline(self, launch: str, row_id: int, status: Status, wall: float) -> None:
        timeline, elapsed = status.verdict.timeline, status.elapsed
        rows = self._timeline_rows(launch, row_id)
        # The k-th occurrence of an entry in the snapshot is the k-th stored occurrence of it: a stall that
        # comes back is a new entry, an entry read again after a restart is not.
        stored: dict[tuple[_Entry, int], tuple[int, float | None]] = {}
        seen: Counter[_Entry] = Counter()
        for index, (_, key, duration) in enumerate(rows):
            stored[(key, seen[key])] = (index, duration)
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
                index, had = known
                if had is None and duration is not None:
                    seq = rows[index][0]
                    self._conn.execute(
                        "UPDATE transitions SET duration = ? WHERE incarnation_id = ? AND seq = ?",
                        (duration, row_id, seq),
                    )
                    rows[index] = (seq, entry, duration)
                continue
            if next_seq >= MAX_TRANSITIONS_PER_INCARNATION:
                continue
            at_wall = wall if elapsed is None else wall - max(0.0, elapsed - item.entered)
            self._conn.execute(
                "INSERT INTO transitions (incarnation_id, seq, state, line, at, reason, wall, duration)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row_id, next_seq, *entry, at_wall, duration),
            )
            rows.append((next_seq, entry, duration))
            next_seq += 1

    def _timeline_rows(self, launch: str, row_id: int) -> list[_TimelineRow]:
        """The incarnation's stored timeline, in order: as this store wrote it last, else read (in a
        transaction; the list is kept, to be updated as the rows are)."""
        incarnation, known, rows = self._rows[launch]  # `_row` put it there
        if known == row_id and rows is not None:
            return rows
        rows = [
            (seq, (state, line, at, reason), duration)
            for seq, state, line, at, reason, duration in self._conn.execute(
                "SELECT seq, state, line, at, reason, duration FROM transitions WHERE incarnation_id = ?"
                " ORDER BY seq",
                (row_id,),
            )
        ]
        self._rows[launch] = (incarnation, row_id, rows)
        return rows

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

        last = await self._run(select)
        for name, (number, _) in last.items():
            self._filed[name] = max(number, self._filed.get(name, 0))
        self._filed_all = self._filed_all or launch is None
        return last

    async def history(self, launch: str | None = None, limit: int = 50) -> list[IncarnationRecord]:
        """Incarnations newest first (by when the store first heard of them), of one launch or all."""
        return await self._run(self._history, launch, limit)

    def _history(self, launch: str | None, limit: int) -> list[IncarnationRecord]:
        rows = self._conn.execute(
            "SELECT id, launch, incarnation, host, engine, state, phase, started_at, updated_at,"
            " read_offset, facts, progress, labels, verdict, arguments FROM incarnations"
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
                    arguments=_arguments(row[14]),
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

    def _row(self, launch: str, incarnation: int) -> int:
        """The id of the incarnation's row, made (and the launch's oldest pruned) if new. In a transaction."""
        last = self._rows.get(launch)
        if last is not None and last[0] == incarnation:
            return last[1]
        row = self._conn.execute(
            "SELECT id FROM incarnations WHERE launch = ? AND incarnation = ?", (launch, incarnation)
        ).fetchone()
        if row is not None:
            self._rows[launch] = (incarnation, int(row[0]), None)
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
        self._rows[launch] = (incarnation, cursor.lastrowid, [])
        return cursor.lastrowid

    def _save_verdict(
        self, launch: str, incarnation: int, verdict: Verdict, wall: float, *, row: bool | None = True
    ) -> None:
        # `row`: its state, phase, facts... too (False: not when a newer snapshot of it was written in this batch;
        # None: a snapshot made of this verdict was, older: what it wrote is this verdict's, only the time is not)
        row_id = self._row(launch, incarnation)
        text = _dumps(verdict.to_json())
        if row:
            self._update_row(launch, row_id, verdict, wall, verdict=text)
        elif row is None:
            self._conn.execute(
                "UPDATE incarnations SET verdict = ?, updated_at = ? WHERE id = ?", (text, wall, row_id)
            )
        else:
            self._conn.execute("UPDATE incarnations SET verdict = ? WHERE id = ?", (text, row_id))

    async def record_verdict(
        self, launch: str, incarnation: int, verdict: Verdict, key: str, *, announce: bool = False
    ) -> bool:
        """Store the verdict object as the incarnation's latest; whether the verdict `key` was announced
        already (before a restart, too). With `announce`, the verdict is also noted as announced (unless it was)
        in the same write: what is said of it goes nowhere else (no outbox row to note it with). A verdict that
        cannot be written now (`failing`) is kept and written when the file allows; whether it was announced is
        then read (a read still works), else taken as not.

        While `write_behind` runs, a verdict of an incarnation that began in this process (numbered above what
        `last_incarnations` found in the file), whose announcements this store has all seen, returns at once
        and is written with the next batch, its announcement with it: a daemon killed meanwhile loses both
        together (with the transitions and checkpoints waiting beside them), and the next one says the crash it
        reads again, once."""
        wall = time.time()
        said = self._said_here(launch, incarnation)
        if said is not None and not announce:
            # announced elsewhere, if at all (the outbox's transaction, `Notes`): asked of the file from now on
            self._said[launch][incarnation] = said = None
        if announce and said is not None and self._write_behind and not self._closed:
            before = key in said
            self._waiting.verdicts[(launch, incarnation)] = (verdict, wall)
            if not before:
                said.add(key)
                self._waiting.marks[(launch, incarnation, key)] = wall
            self._added.set()
            return before

        def write() -> bool:
            self._save_verdict(launch, incarnation, verdict, wall)
            before = self._announced(launch, incarnation, key)
            if announce and not before:
                self._put_verdicts({}, {(launch, incarnation, key): wall})
            return before

        try:
            before = await self._run(self._write, write)
        except Exception as exc:
            if not passing(exc):
                raise
            self._waiting.verdicts[(launch, incarnation)] = (verdict, wall)
            self._added.set()
            if (launch, incarnation, key) in self._waiting.marks:
                before = True
            else:
                try:
                    before = await self._run(self._announced, launch, incarnation, key)
                except sqlite3.Error:
                    before = False  # said again rather than never
            if announce and not before:
                self._waiting.marks[(launch, incarnation, key)] = wall
        if said is not None:
            said.add(key)
        return before

    def _said_here(self, launch: str, incarnation: int) -> set[str] | None:
        """The announcements of an incarnation that began in this process, all known here; None: ask the file."""
        filed = self._filed.get(launch, 0 if self._filed_all else None)
        if filed is None or incarnation <= filed:
            return None
        known = self._said.setdefault(launch, {})
        if incarnation not in known:
            known[incarnation] = set()
            while len(known) > MAX_INCARNATIONS_PER_LAUNCH:  # the oldest is asked of the file from now on
                oldest = min(known)
                del known[oldest]
                self._filed[launch] = max(oldest, self._filed.get(launch, 0))
        return known.get(incarnation)

    async def mark_announced(self, launch: str, incarnation: int, verdict_key: str) -> None:
        """Note that this verdict was said (to every notifier it goes to); kept and written when the file
        allows if it cannot be written now."""
        mark = {(launch, incarnation, verdict_key): time.time()}
        said = self._said_here(launch, incarnation)
        if said is not None:
            said.add(verdict_key)
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
        snapshots: Mapping[tuple[str, int], tuple[_Snapshot, float]] | None = None,
    ) -> None:
        for (launch, incarnation), (verdict, wall) in verdicts.items():
            # a snapshot of the incarnation taken after the verdict (in this batch, written before it) is newer;
            # one made of this verdict (`stands_for`) wrote its row already
            snapshot, at = (snapshots or {}).get((launch, incarnation), (None, 0.0))
            made_of = isinstance(snapshot, Status) and snapshot.verdict is verdict
            row = False if at > wall else None if made_of else True
            self._save_verdict(launch, incarnation, verdict, wall, row=row)
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


def _nothing() -> None:
    """A call that only writes what waits to be written (see `StateStore._run`)."""


@dataclass
class _Waiting:
    """What waits to be written (`write_behind`), or could not be written yet: see `StateStore._run`."""

    # (launch, incarnation) -> (status snapshot, wall time) of transitions not yet written (`write_behind`): a
    # function that takes the snapshot until the batch is taken to be written (`_take_snapshots`)
    snapshots: dict[tuple[str, int], tuple[_Snapshot, float]] = field(default_factory=dict)
    # launch -> (offset, wall time, blob) of the checkpoint saved last and not yet written (`write_behind`)
    checkpoints: dict[str, tuple[int, float, bytes]] = field(default_factory=dict)
    # (launch, incarnation) -> (verdict, wall time), and (launch, incarnation, key) -> wall time of the
    # verdicts and announcements that could not be written yet (tried again until they are: see `failing`)
    verdicts: dict[tuple[str, int], tuple[Verdict, float]] = field(default_factory=dict)
    marks: dict[tuple[str, int, str], float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(vars(self).values())


def _take_snapshots(snapshots: dict[tuple[str, int], tuple[_Snapshot, float]]) -> None:
    """Take the snapshots given as functions (on the event loop, where the followers are), each at its wall time
    now: the incarnation as it is when written, its transitions of the batch all in it."""
    for key, (status, _) in list(snapshots.items()):
        if isinstance(status, Status):
            continue
        try:
            snapshots[key] = (status(), time.time())
        except Exception as exc:  # a bug: said, and the batch's other rows are written
            log.error(
                "status snapshot failed", launch=key[0], incarnation=key[1], error=repr(exc), exc_info=exc
            )
            del snapshots[key]


@asynccontextmanager
async def open_store(state_dir: str | Path, *, readonly: bool = False) -> AsyncIterator[StateStore]:
    """`StateStore.open(...)`, closed (what waits written) when the block is left."""
    store = await StateStore.open(state_dir, readonly=readonly)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()
