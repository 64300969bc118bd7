"""Human output: a verdict object as a concise timeline with durations, progress, facts and the error."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from watchdog.vocabulary import VERDICTS, State, format_duration

_HEADLINE = {state.value: state.value for state in VERDICTS} | {State.STOPPED.value: "stopped cleanly"}


def render_verdict(v: dict[str, Any], *, source: str = "") -> str:
    """The verdict object of `to_json` as text for a terminal."""
    out: list[str] = []
    state = v["state"]
    engine = v.get("engine") or "unknown engine"
    missing = v.get("missing_log")
    if missing and missing.get("path"):
        waited = missing.get("seconds")
        waited_text = f" (waited {format_duration(waited)})" if isinstance(waited, int | float) else ""
        head = f"no log: {missing['path']} does not exist{waited_text}"
    elif state in _HEADLINE:
        head = _HEADLINE[state]
        if state == "crashed":
            head += f" during {v['phase']}"
        elif state == "ready" and v.get("time_to_ready_seconds") is not None:
            head += f" after {format_duration(v['time_to_ready_seconds'])}"
    else:
        head = f"no verdict: the log ends in {v['phase']}"
    where = f"{source}: " if source else ""
    if missing:  # its head names the path; no launch, so no timeline (its stall is not a phase that hung)
        likely = "a typo in the log's path, or a launch that never started"
        out.append(head)
        gave_up = missing.get("overdue") or v.get("timed_out")
        out.append(f"  {likely if gave_up else 'waiting for it to appear'}")
        return "\n".join(out)
    out.append(f"{where}{engine} {head}")
    if v.get("incarnations", 1) > 1:
        out.append(f"  (launch #{v['incarnation']} of {v['incarnations']} in this log)")
    for item in v["timeline"]:
        at = item.get("at") or ""
        dur = item.get("duration_seconds")
        dur_text = format_duration(dur) if dur is not None else ""
        line = f"line {item['line']}" if item.get("line") else (item.get("reason") or "")
        out.append(f"  {item['state']:<20} {at:<20} {dur_text:>7}  {line}")
    if v["progress"]:
        parts = [f"{k} {p['done']}/{p['total']}" for k, p in v["progress"].items()]
        out.append("  progress: " + ", ".join(parts))
    if v["facts"]:
        parts = [f"{k}={_num(val)}" for k, val in v["facts"].items()]
        out.append("  facts: " + ", ".join(parts))
    err = v.get("error")
    if err:
        ranks = f" on ranks {', '.join(err['ranks'])}" if err.get("ranks") else ""
        out.append(f"error [{err['category']}]{ranks} (line {err['line']}):")
        out.append(f"  {err['summary']}")
        out.append(f"  hint: {err['hint']}")
        if err.get("traceback"):
            out.append("traceback:")
            out.extend(f"  {line}" for line in err["traceback"])
        elif err.get("context"):
            out.append("last lines:")
            out.extend(f"  {line}" for line in err["context"])
    out.append(f"  ({v['lines_read']} lines, {v['bytes_read']} bytes read)")
    return "\n".join(out)


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def write_out(text: str, file: TextIO | None = None) -> None:
    """Print `text`; a reader that went away (`watchdog replay log | head`) is not an error of ours."""
    target = file or sys.stdout
    try:
        print(text, file=target, flush=True)
    except BrokenPipeError:
        # so that the interpreter's final flush does not fail on the same pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, target.fileno())
        os.close(devnull)
