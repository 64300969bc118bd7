"""Silences (issue 9): a launch's alerts held until a wall time."""

from __future__ import annotations

import time

from watchdog.store.connection import passing
from watchdog.store.database import Database

__all__ = ["Silences"]


class Silences(Database):
    """The silences, by launch."""

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
