"""Comparison with the launch before: what changed between two incarnations of a launch (its arguments, phase
durations, time to ready and memory facts), as one typed value every sink renders (pure).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from watchdog.core.arguments import Argument
from watchdog.core.facts import GLANCE, FactValue, fact_text, number
from watchdog.vocabulary import STARTUP_PHASES, format_duration

__all__ = ["ArgumentChange", "Baseline", "Changes", "FactChange", "PhaseChange", "compare"]

# A value that differs at every run whatever was asked: an object's address in a repr (`<... at 0x7f3a...>`)
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")
_PHASES = tuple(p.value for p in STARTUP_PHASES)
_COMPARED_FACTS = tuple(dict.fromkeys(name for name, _ in GLANCE))  # the memory facts worth a glance
_SHOWN = 3  # changed arguments a one-line summary names before "and N more"
_CACHED = 256  # argument comparisons remembered (see `_compared`)


@dataclass(frozen=True, slots=True)
class Baseline:
    """What is compared of one incarnation: made from a verdict (`Verdict.baseline`) or from the store's record
    of an earlier one (`IncarnationRecord.baseline`)."""

    incarnation: int
    arguments: tuple[Argument, ...] = ()
    phases: tuple[tuple[str, float], ...] = ()  # (startup phase, seconds) of the phases it went through whole
    time_to_ready: float | None = None
    facts: tuple[tuple[str, FactValue], ...] = ()


@dataclass(frozen=True, slots=True)
class ArgumentChange:
    """An argument changed, added (`before` None) or removed (`after` None) since the launch before."""

    name: str
    flag: str
    before: str | None
    after: str | None

    @property
    def kind(self) -> str:
        """ "changed", "added" or "removed"."""
        return "added" if self.before is None else "removed" if self.after is None else "changed"

    def text(self) -> str:
        """As a person reads it: `--mem-fraction-static 0.78 -> 0.92`, `--moe-a2a-backend flashinfer added`."""
        if self.before is None:
            return f"{self.flag} {_shown(self.after)} added"
        if self.after is None:
            return f"{self.flag} {_shown(self.before)} removed"
        return f"{self.flag} {_shown(self.before)} -> {_shown(self.after)}"

    def to_json(self) -> dict[str, Any]:
        """An entry of `changes.arguments` (docs/contracts.md)."""
        return {"name": self.name, "flag": self.flag, "before": self.before, "after": self.after}


@dataclass(frozen=True, slots=True)
class PhaseChange:
    """A startup phase's duration in the launch before and in this one (None: not gone through whole)."""

    phase: str
    before: float | None
    after: float | None

    def text(self) -> str:
        """`loading_weights 4m10s -> 2m05s`."""
        return f"{self.phase} {_seconds(self.before)} -> {_seconds(self.after)}"

    def to_json(self) -> dict[str, Any]:
        """An entry of `changes.phases`."""
        return {
            "phase": self.phase,
            "before_seconds": _round(self.before),
            "after_seconds": _round(self.after),
        }


@dataclass(frozen=True, slots=True)
class FactChange:
    """A memory fact whose value differs from the launch before."""

    name: str
    before: FactValue
    after: FactValue

    def text(self) -> str:
        """`avail_mem_after_weights_gb 16.3 GB -> 9.1 GB`."""
        return f"{self.name} {fact_text(self.name, self.before)} -> {fact_text(self.name, self.after)}"

    def to_json(self) -> dict[str, Any]:
        """An entry of `changes.facts`."""
        return {"name": self.name, "before": self.before, "after": self.after}


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since incarnation `since_incarnation`, the launch before this one."""

    since_incarnation: int
    arguments: tuple[ArgumentChange, ...] = ()
    phases: tuple[PhaseChange, ...] = ()
    time_to_ready: tuple[float | None, float | None] | None = None  # (before, after); None: neither was ready
    facts: tuple[FactChange, ...] = ()
    compared_arguments: bool = (
        False  # both launches showed their arguments: `arguments` says all that changed
    )

    def summary(self) -> str:
        """One line for an alert or a list: `changed since #3: --mem-fraction-static 0.78 -> 0.92; time to ready
        11m02s -> 9m40s`; "" when there is nothing to say."""
        parts: list[str] = []
        if self.arguments:
            shown = [c.text() for c in self.arguments[:_SHOWN]]
            more = len(self.arguments) - _SHOWN
            parts.append(", ".join(shown) + (f" and {more} more" if more > 0 else ""))
        elif self.compared_arguments:
            parts.append("same arguments")
        if self.time_to_ready is not None:
            before, after = self.time_to_ready
            parts.append(f"time to ready {_seconds(before)} -> {_seconds(after)}")
        if not parts:
            return ""
        return f"changed since #{self.since_incarnation}: " + "; ".join(parts)

    def lines(self) -> list[str]:
        """Every change, a line each, for the text report."""
        out = [c.text() for c in self.arguments]
        if self.compared_arguments and not self.arguments:
            out.append("arguments: the same")
        out += [c.text() for c in self.phases]
        if self.time_to_ready is not None:
            before, after = self.time_to_ready
            out.append(f"time to ready {_seconds(before)} -> {_seconds(after)}")
        out += [c.text() for c in self.facts]
        return out

    def to_json(self) -> dict[str, Any]:
        """The `changes` object of the JSON contract (docs/contracts.md)."""
        out: dict[str, Any] = {
            "since_incarnation": self.since_incarnation,
            "arguments": [c.to_json() for c in self.arguments],
            "arguments_compared": self.compared_arguments,
            "phases": [c.to_json() for c in self.phases],
            "time_to_ready": None,
            "facts": [c.to_json() for c in self.facts],
        }
        if self.time_to_ready is not None:
            before, after = self.time_to_ready
            out["time_to_ready"] = {"before_seconds": _round(before), "after_seconds": _round(after)}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Changes:
        """The value `to_json` wrote (a stored verdict's `changes`, for `history`).

        Raises:
            ValueError: `data` is not such an object.
        """
        try:
            ready = data.get("time_to_ready")
            return cls(
                since_incarnation=int(data["since_incarnation"]),
                arguments=tuple(
                    ArgumentChange(str(a["name"]), str(a["flag"]), a["before"], a["after"])
                    for a in data.get("arguments", ())
                ),
                phases=tuple(
                    PhaseChange(str(p["phase"]), p["before_seconds"], p["after_seconds"])
                    for p in data.get("phases", ())
                ),
                time_to_ready=None if ready is None else (ready["before_seconds"], ready["after_seconds"]),
                facts=tuple(
                    FactChange(str(f["name"]), f["before"], f["after"]) for f in data.get("facts", ())
                ),
                compared_arguments=bool(data.get("arguments_compared", False)),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a changes object: {exc!r}") from exc


def compare(before: Baseline, after: Baseline, *, volatile: Iterable[str] = ()) -> Changes:
    """What changed from `before` (the launch before) to `after` (this one).

    Arguments are compared when both launches showed them (a log at warning level may show none): each that
    differs, was added or removed, but those named in `volatile` (a random seed: new at every launch by
    nature). Phases: each startup phase either went through whole, before -> after. Time to ready when either
    was ready. Memory facts (`facts.GLANCE`) both found, where they differ.
    """
    compared = bool(before.arguments) and bool(after.arguments)
    return Changes(
        since_incarnation=before.incarnation,
        arguments=_compared(before.arguments, after.arguments, frozenset(volatile)) if compared else (),
        phases=_phases(dict(before.phases), dict(after.phases)),
        time_to_ready=None
        if before.time_to_ready is None and after.time_to_ready is None
        else (before.time_to_ready, after.time_to_ready),
        facts=_facts(dict(before.facts), dict(after.facts)),
        compared_arguments=compared,
    )


# A verdict is made at every status snapshot, and its arguments (SGLang's ~500) are the same tuples each time
# until the engine prints them again: their comparison is remembered by the tuples' identity (kept alive here,
# so an id is not reused while its entry stands).
_REMEMBERED: dict[
    tuple[int, int, frozenset[str]],
    tuple[tuple[Argument, ...], tuple[Argument, ...], tuple[ArgumentChange, ...]],
] = {}


def _compared(
    before: tuple[Argument, ...], after: tuple[Argument, ...], volatile: frozenset[str]
) -> tuple[ArgumentChange, ...]:
    if before is after:
        # a relaunch with the same arguments holds the same tuple (`Lifecycle`): nothing changed, and no entry
        # taken (a crash loop's thousands of launches would push out the comparisons that found something)
        return ()
    key = (id(before), id(after), volatile)
    hit = _REMEMBERED.get(key)
    if hit is not None and hit[0] is before and hit[1] is after:
        return hit[2]
    out = _arguments(before, after, volatile)
    if len(_REMEMBERED) >= _CACHED:
        _REMEMBERED.clear()
    _REMEMBERED[key] = (before, after, out)
    return out


def _arguments(
    before: tuple[Argument, ...], after: tuple[Argument, ...], volatile: frozenset[str]
) -> tuple[ArgumentChange, ...]:
    old = {a.name: a for a in before}
    new = {a.name: a for a in after}
    out: list[ArgumentChange] = []
    for name, arg in new.items():  # in the order this launch's dump has them
        if name in volatile:
            continue
        was = old.get(name)
        if was is None:
            out.append(ArgumentChange(name, arg.flag, None, arg.value))
        # the same text is the same value: an object's address is looked for only in texts that differ
        elif was.value != arg.value and _ADDRESS.sub("at 0x", was.value) != _ADDRESS.sub("at 0x", arg.value):
            out.append(ArgumentChange(name, arg.flag, was.value, arg.value))
    out += [
        ArgumentChange(n, a.flag, a.value, None) for n, a in old.items() if n not in new and n not in volatile
    ]
    return tuple(out)


def _phases(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[PhaseChange, ...]:
    return tuple(
        PhaseChange(phase, before.get(phase), after.get(phase))
        for phase in _PHASES
        if phase in before or phase in after
    )


def _facts(before: Mapping[str, FactValue], after: Mapping[str, FactValue]) -> tuple[FactChange, ...]:
    out = []
    for name in _COMPARED_FACTS:
        old, new = number(before.get(name)), number(after.get(name))
        if old is not None and new is not None and old != new:
            out.append(FactChange(name, before[name], after[name]))
    return tuple(out)


def _shown(value: str | None) -> str:
    # an argument's value in a line: an empty one said as such
    return value or '""'


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
