"""The records `history` reads: a launch's incarnations and their transitions as the store keeps them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from watchdog.core.arguments import Argument
from watchdog.core.compare import Baseline, Changes
from watchdog.core.durations import plausible
from watchdog.jsontext import compact
from watchdog.vocabulary import SETTLED_STATES, STARTUP_PHASES

__all__ = ["IncarnationRecord", "TransitionRecord"]


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
    arguments: tuple[Argument, ...] = ()  # what its engine's dump said it was started with
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

    @property
    def changes(self) -> Changes | None:
        """What changed since the launch before, as its verdict said (None: it said nothing of it)."""
        data = (self.verdict or {}).get("changes")
        if not isinstance(data, dict):
            return None
        try:
            return Changes.from_json(data)
        except ValueError:
            return None  # a row of another build: said as nothing

    def baseline(self) -> Baseline:
        """What a later launch is compared with (`watchdog.core.compare`), as the store keeps it: the startup
        phases it went through whole (the last one only once it ended), its time to ready and its facts."""
        phases = {p.value for p in STARTUP_PHASES}
        return Baseline(
            incarnation=self.incarnation,
            arguments=self.arguments,
            phases=tuple(
                (k, v) for k, v in self.phase_durations.items() if k in phases and k != self.ongoing
            ),
            time_to_ready=self.time_to_ready,
            facts=tuple((k, v) for k, v in self.facts.items() if isinstance(v, int | float | str)),
        )

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
    # orjson where it is installed: the JSON of each verdict, its facts and arguments were ~7 % of a crash
    # loop's daemon (`jsontext.compact`: the same values read back)
    return compact(value)


def _arguments(text: str | None) -> tuple[Argument, ...]:
    """A stored arguments list ([[name, flag, value], ...]); an unreadable one is none."""
    try:
        rows = json.loads(text or "[]")
        return tuple(Argument(str(n), str(f), str(v)) for n, f, v in rows)
    except (ValueError, TypeError):
        return ()


def _object(text: str) -> dict[str, Any]:
    """A stored JSON object. Raises ValueError (or TypeError) when the row holds something else."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {type(value).__name__}")
    return value
