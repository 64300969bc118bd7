"""`StateStore`: the store's parts in one object, and what waits to be written, part by part."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from watchdog.core.verdict import Status
from watchdog.store.announcements import Announcements
from watchdog.store.checkpoints import Checkpoints
from watchdog.store.connection import passing
from watchdog.store.database import _Waiting, log
from watchdog.store.silences import Silences

__all__ = ["StateStore", "open_store"]


class StateStore(Announcements, Checkpoints, Silences):
    """The daemon's durable state; see the package docstring. Make one with `await StateStore.open(dir)`."""

    def _parts(self, waiting: _Waiting) -> tuple[tuple[str, tuple[str, ...], Callable[[], None]], ...]:
        # what waits, part by part: (its name, its fields of `_Waiting`, its writer), transitions first
        return (
            ("transitions", ("snapshots",), lambda: self._record_all(waiting.snapshots)),
            ("checkpoints", ("checkpoints",), lambda: self._put_checkpoints(waiting.checkpoints)),
            ("verdicts", ("verdicts", "marks"), lambda: self._put_verdicts(waiting.verdicts, waiting.marks)),
        )

    def _write_parts(self, waiting: _Waiting) -> _Waiting | None:
        # each part in a transaction of its own: one that fails for good is lost alone (its transitions are read
        # again, its launches resume from the checkpoints before them), one that meets a passing fault is kept
        left = _Waiting()
        for what, fields, write in self._parts(waiting):
            try:
                self._write(write)
            except Exception as exc:
                if not passing(exc):
                    log.warning(f"{what} not stored", count=len(getattr(waiting, fields[0])), error=repr(exc))
                for name in fields if passing(exc) else ():
                    getattr(left, name).update(getattr(waiting, name))
        return left or None

    def _write_waiting(self, waiting: _Waiting) -> None:
        for _, _, write in self._parts(waiting):
            write()

    def _record_all(self, snapshots: Mapping[tuple[str, int], tuple[Status, float]]) -> None:
        for (launch, incarnation), (status, wall) in snapshots.items():
            self._record(launch, incarnation, status, wall)


@asynccontextmanager
async def open_store(state_dir: str | Path, *, readonly: bool = False) -> AsyncIterator[StateStore]:
    """`StateStore.open(...)`, closed (what waits written) when the block is left."""
    store = await StateStore.open(state_dir, readonly=readonly)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()
