"""Per launch one checkpoint: the follower's analysis at a byte offset, kept as the blob it is given."""

from __future__ import annotations

import time
from collections.abc import Mapping

from watchdog.store.database import Database

__all__ = ["MAX_CHECKPOINT_BYTES", "Checkpoints"]

MAX_CHECKPOINT_BYTES = 1 << 20  # a launch's checkpoint (typically 10-50 KB); a bigger one is not written


class Checkpoints(Database):
    """The launches' checkpoints (`watchdog.follow.checkpoint` makes and reads the blobs)."""

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
