"""Learned expectations (pure): how long a launch's phases took when it became ready: deadlines, an ETA."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from watchdog.vocabulary import BAR_OF_PHASE, STARTUP_PHASES, SUCCESS_STATES

if TYPE_CHECKING:
    from watchdog.core.verdict import Verdict

__all__ = ["LEARN_FACTOR", "MIN_SAMPLES", "eta_to_ready", "learned_deadlines", "typical_durations"]

LEARN_FACTOR = 1.5  # a phase may take this many times its p95 before it is stalled
MIN_SAMPLES = 3  # successful launches needed before the history is trusted
_PHASES = tuple(s.value for s in STARTUP_PHASES)
_SUCCESS = frozenset(s.value for s in SUCCESS_STATES)
_BAR_OF_PHASE = {s.value: bar for s, bar in BAR_OF_PHASE.items()}


def _samples(history: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
    # phase durations of the incarnations that became ready (a crashed one's phases say nothing of the usual)
    out: dict[str, list[float]] = {}
    for record in history:
        if record.get("state") not in _SUCCESS:
            continue
        for phase, seconds in (record.get("phase_durations") or {}).items():
            if phase in _PHASES and isinstance(seconds, int | float) and seconds >= 0:
                out.setdefault(phase, []).append(float(seconds))
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]  # nearest rank


def typical_durations(history: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The median duration of each phase over the successful incarnations (phases with enough samples)."""
    return {p: _quantile(v, 0.5) for p, v in _samples(history).items() if len(v) >= MIN_SAMPLES}


def learned_deadlines(
    history: Iterable[Mapping[str, Any]],
    configured: Mapping[str, float],
    *,
    factor: float = LEARN_FACTOR,
) -> dict[str, float]:
    """Per phase: max(configured deadline, factor x p95 of the history); a phase with no configured deadline
    gets the learned one alone once there are enough samples."""
    out = dict(configured)
    for phase, values in _samples(history).items():
        if len(values) >= MIN_SAMPLES:
            out[phase] = max(out.get(phase, 0.0), factor * _quantile(values, 0.95))
    return out


def eta_to_ready(verdict: Verdict, typical: Mapping[str, float], in_phase: float) -> float | None:
    """Seconds until ready: the rest of the current phase (from its progress bar's rate, else its usual
    length) plus the usual length of each phase after it. None when nothing says."""
    phase = verdict.state.value
    if phase not in _PHASES:
        return None
    bar = next((p for p in verdict.progress if p.name == _BAR_OF_PHASE.get(phase)), None)
    rest: float | None = None
    if bar is not None and bar.done and bar.total and in_phase > 0:
        rest = in_phase * max(0.0, bar.total - bar.done) / bar.done
    elif phase in typical:
        rest = max(0.0, typical[phase] - in_phase)
    later = _PHASES[_PHASES.index(phase) + 1 :]
    if rest is None or any(p not in typical for p in later):
        return None
    return rest + sum(typical[p] for p in later)
