"""The verdicts kept and whether each was announced: a verdict announced before a restart is not again."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping

from watchdog.core.verdict import Verdict
from watchdog.store.connection import passing
from watchdog.store.records import Records, _dumps

__all__ = ["Announcements"]


class Announcements(Records):
    """The verdicts of the incarnations and their announcements."""

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
