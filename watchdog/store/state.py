"""`StateStore`: the store's parts in one object, and what waits to be written, part by part."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from watchdog.store.announcements import Announcements
from watchdog.store.checkpoints import Checkpoints
from watchdog.store.connection import passing
from watchdog.store.database import _Waiting, log
from watchdog.store.silences import Silences

__all__ = ["StateStore", "open_store"]


class StateStore(Announcements, Checkpoints, Silences):
    """The daemon's durable state; see the package docstring. Make one with `await StateStore.open(dir)`."""

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

    def _record_all(self, snapshots: Mapping[tuple[str, int], tuple[Mapping[str, Any], float]]) -> None:
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
