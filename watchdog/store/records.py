"""A launch's incarnations and their transitions as the store keeps them, and the records `history` reads."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from watchdog.core.durations import plausible
from watchdog.core.verdict import Status, Verdict
from watchdog.store.database import Database
from watchdog.vocabulary import MAX_INCARNATIONS_PER_LAUNCH, SETTLED_STATES, UNBEGUN_STATES

__all__ = ["MAX_TRANSITIONS_PER_INCARNATION", "IncarnationRecord", "Records", "TransitionRecord"]

MAX_TRANSITIONS_PER_INCARNATION = 200  # a launch that stalls and resumes forever stops adding rows here

log = structlog.get_logger("watchdog.store")
_Entry = tuple[str, int | None, str | None, str]  # a timeline entry's identity: state, line, at, reason


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


class Records(Database):
    """The incarnations' rows: transitions recorded, the history and the last incarnations read."""

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
