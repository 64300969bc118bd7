"""Verdicts: the JSON object of DESIGN.md and the exit codes, from an analyzer's state (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchdog.core.lifecycle import Incarnation, State
from watchdog.vocabulary import EXIT_CRASHED, EXIT_NO_VERDICT, EXIT_READY, EXIT_STALLED

if TYPE_CHECKING:
    from watchdog.core.analyzer import Analyzer

__all__ = ["EXIT_CODES", "build_verdict", "exit_code", "to_json"]

EXIT_CODES = {
    State.READY: EXIT_READY,
    State.CRASHED: EXIT_CRASHED,
    State.STALLED: EXIT_STALLED,
}


def exit_code(state: State, phase: State | str | None = None) -> int:
    """0 ready (or was ready, then stopped cleanly), 1 crashed, 2 stalled, 3 no verdict (still starting, or
    stopped before it was ready). `phase` is the verdict's phase (for a stop: where the launch had got to)."""
    if state == State.STOPPED and phase is not None and State(phase) == State.READY:
        return EXIT_READY
    return EXIT_CODES.get(state, EXIT_NO_VERDICT)


def to_json(
    inc: Incarnation,
    *,
    engine: str | None,
    lines_read: int,
    bytes_read: int,
    incarnations: int = 1,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The verdict object shared by `replay --json`, `watch --json` and each entry of /status."""
    phase = inc.crash_phase if inc.state == State.CRASHED and inc.crash_phase else inc.phase
    if phase == State.PENDING and inc.state != State.PENDING:
        phase = State.STARTING
    timeline = []
    entries = inc.timeline
    for i, (t, _seconds) in enumerate(entries):
        item: dict[str, Any] = t.to_json()
        duration = inc.duration(i, i + 1) if i + 1 < len(entries) else None
        if duration is not None:
            item["duration_seconds"] = round(duration, 3)
        if t.reason:
            item["reason"] = t.reason
        timeline.append(item)
    out: dict[str, Any] = {
        "engine": engine,
        "state": inc.state.value,
        "phase": phase.value,
        "error": inc.error.to_json() if inc.error and inc.state == State.CRASHED else None,
        "timeline": timeline,
        "progress": {k: {"done": d, "total": t} for k, (d, t) in inc.progress.items()},
        "facts": dict(inc.facts),
        "lines_read": lines_read,
        "bytes_read": bytes_read,
        "incarnation": inc.number,
        "incarnations": incarnations,
    }
    if inc.log_missing and inc.phase == State.PENDING:
        # no log yet: still `pending` (a typo in the path, or a launch that never started, is not a launch that
        # hung); `missing_log` (the follower's: the path, how long) says so, `overdue` once past stall_after
        out["state"] = out["phase"] = State.PENDING.value
        out["missing_log"] = {"overdue": inc.state == State.STALLED}
    if inc.ready_seconds is not None:
        out["time_to_ready_seconds"] = round(inc.ready_seconds, 3)
    if extra:
        out.update(extra)
    return out


def build_verdict(
    analyzer: Analyzer, inc: Incarnation | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The verdict of `replay`, `watch` and /status: `inc` (default: the one a verdict reports) of `analyzer`.

    A crash with no traceback carries the last lines of the log as `error.context`.
    """
    lc = analyzer.lifecycle
    v = to_json(
        inc or lc.verdict_incarnation(),
        engine=analyzer.engine,
        lines_read=analyzer.lines_read,
        bytes_read=analyzer.bytes_read,
        incarnations=lc.current.number,  # the history keeps the last ones only
        extra=extra,
    )
    if v["error"] is not None and not v["error"]["traceback"]:
        v["error"]["context"] = analyzer.tail()
    return v
