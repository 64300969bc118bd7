"""The alert outbox: each alert waits here, in the state file, until each of its notifiers has it.

One row per (notifier, destination, key): a notifier with several URLs (an Alertmanager pair) has a row per
URL, so one that is down never holds back the others, and the key (the alert's dedup key, or a reminder's)
makes enqueueing the same alert twice (after a restart, say) a no-op. A row holds the alert as
`Alert.to_dict()`, never a URL or a secret option: those stay in the config and are looked up when sending.
Delivered and failed rows are kept a while (`KEEP_SECONDS`), for that deduplication, then pruned.

The table lives in the daemon's state file (`watchdog.sqlite3`), made by the store's migrations, on a
connection of its own set up as the store's are (`watchdog.store.connect`); without a state directory (the
demo, tests) the outbox is in memory and lasts as long as the process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from watchdog.store import connect, transaction

if TYPE_CHECKING:
    import sqlite3

__all__ = ["KEEP_SECONDS", "REPEAT", "Item", "Outbox"]

KEEP_SECONDS = 7 * 86400.0  # delivered and failed rows are kept this long (to deduplicate), then pruned
REPEAT = "#"  # a key's repeats (reminders, Alertmanager's re-sends) are `KEY#reminder-N`, `KEY#resend-N`
_T = TypeVar("_T")


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
    next_try: float = 0.0


class Outbox:
    """See the module docstring. Make one with `await Outbox.open(path)` (None: in memory)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        """Use `Outbox.open`: this takes a connection already set up."""
        self._conn = conn
        self._lock = anyio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: Path | None) -> Outbox:
        """Open the outbox in the state file `path` (made and migrated if need be), or in memory when `path` is
        None.

        Raises:
            ConfigError: the file is not a watchdog state file, or a newer watchdog wrote it.
        """
        conn = await anyio.to_thread.run_sync(connect, path)
        return cls(conn)

    async def put(
        self, notifier: str, destinations: int, key: str, alert: dict[str, Any], now: float
    ) -> list[Item]:
        """Enqueue `alert` for each destination of `notifier`; return the new items (those already there,
        delivered or not, are left alone)."""
        text = json.dumps(alert, ensure_ascii=False, separators=(",", ":"))

        def insert() -> list[Item]:
            items = []
            for destination in range(destinations):
                cursor = self._conn.execute(
                    "INSERT OR IGNORE INTO outbox (notifier, destination, key, alert, created_at, next_try)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (notifier, destination, key, text, now, now),
                )
                if cursor.rowcount == 1 and cursor.lastrowid is not None:
                    items.append(Item(cursor.lastrowid, notifier, destination, key, alert, now, 0, now))
            return items

        return await self._transaction(insert)

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
                    continue  # not ours to send: a row some other program wrote
                items.append(Item(int(row[0]), str(row[1]), int(row[2]), str(row[3]), alert, *row[5:8]))
            return items

        return await self._run(select)

    async def delivered(self, item: Item, now: float) -> None:
        """Note that `item` arrived."""
        await self._update("UPDATE outbox SET delivered_at = ?, attempts = ? WHERE id = ?", now, item)

    async def failed(self, item: Item, now: float, error: str) -> None:
        """Give `item` up (refused for good); `error` must carry no secret."""
        await self._update(
            "UPDATE outbox SET failed_at = ?, attempts = ?, error = ? WHERE id = ?", now, item, error
        )

    async def retry(self, item: Item, error: str) -> None:
        """Note a failed attempt; `item.next_try` and `item.attempts` say when and how often."""
        await self._update(
            "UPDATE outbox SET next_try = ?, attempts = ?, error = ? WHERE id = ?", item.next_try, item, error
        )

    async def prune(self, now: float) -> int:
        """Drop the delivered and failed rows older than `KEEP_SECONDS`, and delivered repeats (reminders,
        re-sends) at once; return how many were dropped."""

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

        return await self._transaction(prune)

    async def close(self) -> None:
        """Close the connection (what is enqueued is already on disk)."""
        async with self._lock:
            if not self._closed:
                self._closed = True
                await anyio.to_thread.run_sync(self._conn.close)

    async def _update(self, sql: str, value: float, item: Item, error: str | None = None) -> None:
        args: tuple[Any, ...] = (
            (value, item.attempts, item.id) if error is None else (value, item.attempts, error, item.id)
        )
        await self._transaction(lambda: self._conn.execute(sql, args))

    async def _transaction(self, fn: Callable[[], _T]) -> _T:
        return await self._run(lambda: transaction(self._conn, fn))

    async def _run(self, fn: Callable[[], _T]) -> _T:
        async with self._lock:
            if self._closed:
                raise RuntimeError("the outbox is closed")
            # not abandoned on cancellation: the statement ends (committed or rolled back) before the lock goes
            return await anyio.to_thread.run_sync(fn)
