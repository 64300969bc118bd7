"""The alert outbox: each alert waits here, in the state file, until each of its notifiers has it
(docs/architecture.md, "The alerts")."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import structlog

from watchdog.store import RETRY_SECONDS, connect, passing, transaction

if TYPE_CHECKING:
    import sqlite3

    from anyio.abc import TaskStatus

__all__ = ["KEEP_SECONDS", "REPEAT", "Item", "Notes", "Outbox", "Problem"]

KEEP_SECONDS = 7 * 86400.0  # delivered and failed rows are kept this long (to deduplicate), then pruned
# Seconds a write waits for the file's lock (the store's own writes take milliseconds): an alert is sent from
# memory rather than wait behind another process's long lock, and written later
BUSY_TIMEOUT = 1.0
REPEAT = "#"  # a key's repeats (reminders, Alertmanager's re-sends) are `KEY#reminder-N`, `KEY#resend-N`
_T = TypeVar("_T")

log = structlog.get_logger("watchdog.outbox")


@dataclass
class Item:
    """One alert for one notifier's destination, not delivered yet."""

    id: int
    notifier: str
    destination: int
    key: str
    alert: dict[str, Any]
    created_at: float
    attempts: int = 0
    next_try: float = 0.0  # unix time, as kept in the file
    # when it is due on the alerting's monotonic clock (None: not scheduled yet; taken from `next_try`): a
    # step of the wall clock never holds an alert back nor hurries a retry
    due: float | None = None


@dataclass(frozen=True)
class Problem:
    """A problem said and not resolved yet, as the state file keeps it (its `problems` table)."""

    launch: str  # or host:NAME
    kind: str  # crashed, stalled, unreachable
    key: str  # its outbox key
    alert: dict[str, Any]  # Alert.to_dict()
    notifiers: tuple[str, ...]  # who it goes to
    told: tuple[str, ...]  # who heard it
    opened_at: float  # unix time


@dataclass(frozen=True)
class Notes:
    """What an enqueue notes in the state file in the same transaction as its rows, so that no death of the
    daemon between the two says it twice or loses its end: the verdict announced (launch, incarnation, its
    key), the problem it opens, or the one it resolves (launch, kind)."""

    announced: tuple[str, int, str] | None = None
    opened: Problem | None = None
    closed: tuple[str, str] | None = None

    def __bool__(self) -> bool:
        return self.announced is not None or self.opened is not None or self.closed is not None


@dataclass
class _Unwritten:
    """An item the state file could not take yet, and what became of it meanwhile."""

    item: Item
    text: str  # the alert, as JSON
    delivered_at: float | None = None
    failed_at: float | None = None
    error: str | None = None


class Outbox:
    """The outbox (docs/architecture.md, "The alerts"); `await Outbox.open(path)` (None: in memory)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        """Use `Outbox.open`: this takes a connection already set up."""
        self._conn = conn
        self._lock = anyio.Lock()
        self._closed = False
        self._unwritten: dict[int, _Unwritten] = {}  # by (negative) item id: items not in the file yet
        self._updates: dict[int, tuple[str, tuple[Any, ...]]] = {}  # by row id: the last update not written
        self._notes: list[tuple[Notes, float]] = []  # notes not written yet, in order
        self._next_id = -1
        self._waiting = anyio.Event()  # set while something waits to be written
        self._warned: set[str] = set()  # the kinds of prune errors said already
        # (launch, kind) of each problem row the file holds, or will once what was put is written (None until
        # `problems` read them: any may be there)
        self._problems: set[tuple[str, str]] | None = None
        self.failing: str | None = None  # why the file cannot be written now; None while it can

    @classmethod
    async def open(cls, path: Path | None) -> Outbox:
        """Open the outbox in the state file `path` (made and migrated if need be), or in memory when `path` is
        None.

        Raises:
            ConfigError: the file is not a watchdog state file, or a newer watchdog wrote it.
        """
        # Shielded: a cancel while the thread opens the file would lose the connection it returns, unclosed.
        with anyio.CancelScope(shield=True):
            conn = await anyio.to_thread.run_sync(connect, path)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        return cls(conn)

    async def put(
        self, notifier: str, destinations: int, key: str, alert: dict[str, Any], now: float
    ) -> list[Item]:
        """Enqueue `alert` for each destination of `notifier`; return the new items (those already there,
        delivered or not, are left alone). When the file cannot be written, the items are made in memory (and
        written later by `keep_written`)."""
        items, _ = await self.put_all([(notifier, destinations)], key, alert, now)
        return items

    async def put_all(
        self,
        targets: Sequence[tuple[str, int]],
        key: str,
        alert: dict[str, Any],
        now: float,
        notes: Notes | None = None,
    ) -> tuple[list[Item], bool]:
        """Enqueue `alert` for each destination of each (notifier, destinations) of `targets`, and write
        `notes`, in one transaction; return the new items and whether the announcement of `notes` was written
        (its incarnation's row is in the file). When the file cannot be written, the items are made in memory
        and the notes wait with them (written later by `keep_written`); False then."""
        notes = self._needed(notes)
        if not targets and not notes:
            return [], False
        text = json.dumps(alert, ensure_ascii=False, separators=(",", ":")) if targets else ""

        def insert() -> tuple[list[Item], bool]:
            items = []
            for notifier, destinations in targets:
                for destination in range(destinations):
                    cursor = self._conn.execute(
                        "INSERT OR IGNORE INTO outbox (notifier, destination, key, alert, created_at, next_try)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (notifier, destination, key, text, now, now),
                    )
                    if cursor.rowcount == 1 and cursor.lastrowid is not None:
                        items.append(Item(cursor.lastrowid, notifier, destination, key, alert, now, 0, now))
            return items, self._note(notes, now)

        try:
            return await self._run(lambda: self._written(insert))
        except Exception as exc:
            if not passing(exc):
                raise
        held = {(u.item.notifier, u.item.destination, u.item.key) for u in self._unwritten.values()}
        items = []
        for notifier, destinations in targets:
            for destination in range(destinations):
                if (notifier, destination, key) in held:
                    continue  # enqueued already, not written yet
                item = Item(self._next_id, notifier, destination, key, alert, now, 0, now)
                self._next_id -= 1
                self._unwritten[item.id] = _Unwritten(item, text)
                items.append(item)
        if notes:
            self._notes.append((notes, now))
        self._waiting.set()
        return items, False

    def keeps(self, launch: str, kind: str) -> bool:
        """Whether the file may hold a problem row of `launch` and `kind` (one put and not closed since, or one
        there before: any, until `problems` has read them)."""
        return self._problems is None or (launch, kind) in self._problems

    def _needed(self, notes: Notes | None) -> Notes | None:
        """`notes` less what changes nothing in the file: a problem that no notifier heard (its end tells no
        one, nor does a restarted daemon's) where no row of it is kept, and the end of one with no row; and the
        problem rows the file will hold noted (on the event loop, in the order the writes are made)."""
        if not notes or self._problems is None:
            return notes
        closed, opened = notes.closed, notes.opened
        if closed is not None:
            if closed not in self._problems:
                closed = None
            self._problems.discard(notes.closed)
        if opened is not None:
            if opened.told or (opened.launch, opened.kind) in self._problems:
                self._problems.add((opened.launch, opened.kind))
            else:
                opened = None
        if closed is notes.closed and opened is notes.opened:
            return notes
        return Notes(announced=notes.announced, opened=opened, closed=closed)

    async def problems(self) -> list[Problem]:
        """The problems said and not resolved (what a restarted daemon still has to resolve), oldest first."""

        def select() -> tuple[list[Problem], set[tuple[str, str]]]:
            rows = self._conn.execute(
                "SELECT launch, kind, key, alert, notifiers, told, opened_at FROM problems ORDER BY opened_at"
            ).fetchall()
            problems = []
            for launch, kind, key, alert, notifiers, told, opened_at in rows:
                try:
                    data, names, heard = json.loads(alert), json.loads(notifiers), json.loads(told)
                except ValueError:
                    log.warning("problem row unreadable; left alone", launch=launch, kind=kind)
                    continue
                problems.append(
                    Problem(
                        launch, kind, key, data, tuple(map(str, names)), tuple(map(str, heard)), opened_at
                    )
                )
            return problems, {(str(row[0]), str(row[1])) for row in rows}

        problems, rows = await self._run(select)
        # every row, an unreadable one too (a problem put again replaces it), and those waiting to be written
        self._problems = rows | {(n.opened.launch, n.opened.kind) for n, _ in self._notes if n.opened}
        return problems

    def _note(self, notes: Notes | None, now: float) -> bool:
        # in the worker thread, inside the transaction of the rows they go with
        if not notes:
            return False
        announced = False
        if notes.announced is not None:
            launch, incarnation, verdict = notes.announced
            announced = (
                self._conn.execute(
                    "INSERT INTO verdicts (incarnation_id, key, announced_at)"
                    " SELECT id, ?, ? FROM incarnations WHERE launch = ? AND incarnation = ?"
                    " ON CONFLICT (incarnation_id, key) DO UPDATE SET announced_at = excluded.announced_at",
                    (verdict, now, launch, incarnation),
                ).rowcount
                == 1
            )
        if notes.closed is not None:
            self._conn.execute("DELETE FROM problems WHERE launch = ? AND kind = ?", notes.closed)
        problem = notes.opened
        if problem is not None:
            self._conn.execute(
                "INSERT OR REPLACE INTO problems (launch, kind, key, alert, notifiers, told, opened_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    problem.launch,
                    problem.kind,
                    problem.key,
                    json.dumps(problem.alert, ensure_ascii=False, separators=(",", ":")),
                    json.dumps(problem.notifiers),
                    json.dumps(problem.told),
                    problem.opened_at,
                ),
            )
        return announced

    async def pending(self) -> list[Item]:
        """Every item neither delivered nor given up, oldest first (what a restarted daemon sends)."""

        def select() -> list[Item]:
            rows = self._conn.execute(
                "SELECT id, notifier, destination, key, alert, created_at, attempts, next_try FROM outbox"
                " WHERE delivered_at IS NULL AND failed_at IS NULL ORDER BY id"
            ).fetchall()
            items = []
            for row in rows:
                try:
                    alert = json.loads(row[4])
                except ValueError:
                    log.warning("outbox row unreadable; not sent", id=row[0], key=row[3])
                    continue  # not ours to send: a row some other program wrote
                items.append(Item(int(row[0]), str(row[1]), int(row[2]), str(row[3]), alert, *row[5:8]))
            return items

        return await self._run(select)

    async def delivered(self, item: Item, now: float) -> None:
        """Note that `item` arrived."""
        await self._update(
            item, "UPDATE outbox SET delivered_at = ?, attempts = ?", (now, item.attempts), delivered_at=now
        )

    async def failed(self, item: Item, now: float, error: str) -> None:
        """Give `item` up (refused for good); `error` must carry no secret."""
        await self._update(
            item,
            "UPDATE outbox SET failed_at = ?, attempts = ?, error = ?",
            (now, item.attempts, error),
            failed_at=now,
            error=error,
        )

    async def retry(self, item: Item, error: str) -> None:
        """Note a failed attempt; `item.next_try` and `item.attempts` say when and how often."""
        await self._update(
            item,
            "UPDATE outbox SET next_try = ?, attempts = ?, error = ?",
            (item.next_try, item.attempts, error),
            error=error,
        )

    async def prune(self, now: float) -> int:
        """Drop the delivered and failed rows older than `KEEP_SECONDS`, and delivered repeats (reminders,
        re-sends) at once; return how many were dropped. Its errors are logged (once per kind of error: it runs
        every hour) instead of raised; 0 then."""

        def prune() -> int:
            old = self._conn.execute(
                "DELETE FROM outbox WHERE (delivered_at IS NOT NULL OR failed_at IS NOT NULL) AND created_at < ?",
                (now - KEEP_SECONDS,),
            ).rowcount
            repeats = self._conn.execute(
                "DELETE FROM outbox WHERE delivered_at IS NOT NULL AND (key GLOB ? OR key GLOB ?)",
                (f"*{REPEAT}resend*", f"*{REPEAT}reminder*"),
            ).rowcount
            return old + repeats

        try:
            return await self._run(lambda: transaction(self._conn, prune))
        except Exception as exc:  # the rows wait for the next prune; delivery goes on
            kind = type(exc).__name__
            if kind not in self._warned:
                self._warned.add(kind)
                log.warning("outbox not pruned; trying again later", error=f"{kind}: {exc}")
            return 0

    async def keep_written(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write what `put_all` and the updates could not (every `RETRY_SECONDS`), until cancelled."""
        task_status.started()
        while True:
            await self._waiting.wait()
            await anyio.sleep(RETRY_SECONDS)
            await self.write_waiting()

    async def write_waiting(self) -> bool:
        """Try once to write the items and updates that wait; whether nothing waits any more."""
        async with self._lock:
            if self._closed:
                return False
            if self._unwritten or self._updates or self._notes:
                unwritten, updates, notes = dict(self._unwritten), dict(self._updates), list(self._notes)
                try:
                    ids = await anyio.to_thread.run_sync(
                        lambda: self._written(lambda: self._write(unwritten, updates, notes))
                    )
                except Exception as exc:
                    if not passing(exc):
                        raise
                    return False
                for old, new in ids.items():
                    self._unwritten.pop(old).item.id = new  # its later updates go to its row
                for row in updates:
                    self._updates.pop(row, None)
                del self._notes[: len(notes)]
            if not (self._unwritten or self._updates or self._notes):
                self._waiting = anyio.Event()
                return True
            return False

    def _write(
        self,
        unwritten: dict[int, _Unwritten],
        updates: dict[int, tuple[str, tuple[Any, ...]]],
        notes: Sequence[tuple[Notes, float]] = (),
    ) -> dict[int, int]:
        ids = {}
        for old, u in unwritten.items():
            item = u.item
            self._conn.execute(
                "INSERT OR IGNORE INTO outbox (notifier, destination, key, alert, created_at, attempts, next_try,"
                " delivered_at, failed_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    item.notifier,
                    item.destination,
                    item.key,
                    u.text,
                    item.created_at,
                    item.attempts,
                    item.next_try,
                    u.delivered_at,
                    u.failed_at,
                    u.error or "",
                ),
            )
            row = self._conn.execute(
                "SELECT id FROM outbox WHERE notifier = ? AND destination = ? AND key = ?",
                (item.notifier, item.destination, item.key),
            ).fetchone()
            ids[old] = int(row[0])  # the row inserted, or the one of that key already there
        for row_id, (sql, args) in updates.items():
            self._conn.execute(f"{sql} WHERE id = ?", (*args, row_id))
        for note, at in notes:
            self._note(note, at)
        return ids

    async def close(self) -> None:
        """Close the connection (what is enqueued is already on disk, but for what could not be written)."""
        if self._unwritten or self._updates or self._notes:
            with anyio.CancelScope(shield=True):
                await self.write_waiting()
            if self._unwritten or self._updates or self._notes:
                log.warning(
                    "outbox items not written: the state file cannot be written",
                    items=len(self._unwritten),
                    updates=len(self._updates),
                    error=self.failing,
                )
        # Shielded: closed by a cancelled scope (the supervisor's exit stack), the connection is still closed.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if not self._closed:
                    self._closed = True
                    await anyio.to_thread.run_sync(self._conn.close)

    async def _update(self, item: Item, sql: str, args: tuple[Any, ...], **after: Any) -> None:
        async with self._lock:
            unwritten = self._unwritten.get(item.id)
            if unwritten is not None:  # not in the file yet: written with what became of it
                for name, value in after.items():
                    setattr(unwritten, name, value)
                return
            if self._closed:
                raise RuntimeError("the outbox is closed")
            row_id = item.id
            try:
                await anyio.to_thread.run_sync(
                    lambda: self._written(lambda: self._conn.execute(f"{sql} WHERE id = ?", (*args, row_id)))
                )
            except Exception as exc:
                if not passing(exc):
                    raise
                self._updates[row_id] = (sql, args)
                self._waiting.set()

    def _written(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in one transaction (in the worker thread); keep `failing` up to date."""
        try:
            result = transaction(self._conn, fn)
        except Exception as exc:
            if passing(exc):
                if self.failing is None:  # said once per spell
                    log.warning(
                        "outbox cannot be written; alerts are sent from memory and written when it can",
                        error=str(exc),
                    )
                self.failing = str(exc)
            raise
        if self.failing is not None:
            self.failing = None
            log.info("outbox written again")
        return result

    async def _run(self, fn: Callable[[], _T]) -> _T:
        async with self._lock:
            if self._closed:
                raise RuntimeError("the outbox is closed")
            # not abandoned on cancellation: the statement ends (committed or rolled back) before the lock goes
            return await anyio.to_thread.run_sync(fn)
