"""The store's one connection, used by one call at a time in a worker thread; what waits to be written
(`write_behind`), written in batches and kept through passing faults (`failing`)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import anyio
import anyio.to_thread
import structlog
from anyio.abc import TaskStatus

from watchdog.core.verdict import Status, Verdict
from watchdog.store.connection import BUSY_TIMEOUT, connect, db_path, passing, transaction
from watchdog.store.statedir import refuse_legacy_state

__all__ = ["FAILING_BUSY_TIMEOUT", "RETRY_SECONDS", "TRANSITION_BATCH_DELAY", "Database"]

# With `write_behind` running: seconds a transition's snapshot may wait, to be written with the others of that
# moment in one trip to the worker thread and one commit (a later snapshot of the same incarnation replaces it)
TRANSITION_BATCH_DELAY = 0.25
# While writes fail (a full disk, the file locked by another process past BUSY_TIMEOUT): seconds a write waits
# for the lock, so that what must not wait (a verdict, its alert) learns at once that it cannot be written;
# and seconds between attempts to write what waits
FAILING_BUSY_TIMEOUT = 0.2
RETRY_SECONDS = 2.0

_T = TypeVar("_T")

log = structlog.get_logger("watchdog.store")


class Database:
    """The connection under `StateStore`'s parts (each a subclass); see the package docstring."""

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
    async def open(cls, state_dir: str | Path, *, readonly: bool = False) -> Self:
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
        """Write each part that waits in a transaction of its own; return what is kept for later (`StateStore`)."""
        raise NotImplementedError

    def _write_waiting(self, waiting: _Waiting) -> None:
        """Write all that waits, in the caller's transaction (`StateStore`)."""
        raise NotImplementedError

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
