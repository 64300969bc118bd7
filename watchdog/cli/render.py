"""Human output: a verdict object as a concise timeline with durations, progress, facts and the error."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from watchdog.core.verdict import Verdict
from watchdog.vocabulary import VERDICTS, State, format_duration

_HEADLINE = {state: state.value for state in VERDICTS} | {State.STOPPED: "stopped cleanly"}


def render_verdict(v: Verdict, *, source: str = "") -> str:
    """A verdict as text for a terminal."""
    missing = v.missing_log
    if missing is not None and missing.path:
        waited = f" (waited {format_duration(missing.seconds)})" if missing.seconds is not None else ""
        head = f"no log: {missing.path} does not exist{waited}"
    elif v.state in _HEADLINE:
        head = _HEADLINE[v.state]
        if v.state is State.CRASHED:
            head += f" during {v.phase.value}"
        elif v.state is State.READY and v.time_to_ready is not None:
            head += f" after {format_duration(v.time_to_ready)}"
    else:
        head = f"no verdict: the log ends in {v.phase.value}"
    if missing is not None:  # its head names the path; no launch, so no timeline (no phase hung)
        likely = "a typo in the log's path, or a launch that never started"
        return f"{head}\n  {likely if missing.overdue or v.timed_out else 'waiting for it to appear'}"
    out = [f"{source + ': ' if source else ''}{v.engine or 'unknown engine'} {head}"]
    if v.incarnations > 1:
        out.append(f"  (launch #{v.incarnation} of {v.incarnations} in this log)")
    for item in v.timeline:
        dur = format_duration(item.duration) if item.duration is not None else ""
        line = f"line {item.line}" if item.line else item.reason
        out.append(f"  {item.state.value:<20} {item.at or '':<20} {dur:>7}  {line}")
    if v.progress:
        out.append("  progress: " + ", ".join(f"{p.name} {p.done}/{p.total}" for p in v.progress))
    if v.facts:
        out.append("  facts: " + ", ".join(f"{k}={_num(val)}" for k, val in v.facts))
    if v.nodes:
        out.append("  nodes:")
        for node in v.nodes:
            nv = node.verdict
            role = " (serves)" if node.serve else ""
            bars = ", ".join(f"{p.name} {p.done}/{p.total}" for p in nv.progress)
            said = f": {nv.error.summary}" if nv.error is not None else ""
            where = f" in {nv.phase.value}" if nv.state is not nv.phase else ""
            out.append(
                f"    {node.name}{role} {node.host or node.target}: {nv.state.value}{where}"
                + (f" [{bars}]" if bars else "")
                + said
            )
    if v.changes is not None:
        out.append(f"changed since launch #{v.changes.since_incarnation}:")
        out.extend(f"  {line}" for line in v.changes.lines() or ["nothing compared"])
    err = v.error
    if err is not None:
        ranks = f" on ranks {', '.join(err.ranks)}" if err.ranks else ""
        failed = v.failed_node
        on_node = f" on node {failed.node}" + (f" ({failed.host})" if failed.host else "") if failed else ""
        out += [
            f"error [{err.category}]{on_node}{ranks} (line {err.line}):",
            f"  {err.summary}",
            f"  hint: {err.hint}",
        ]
        if err.traceback:
            out.append("traceback:")
            out.extend(f"  {line}" for line in err.traceback)
        elif v.context:
            out.append("last lines:")
            out.extend(f"  {line}" for line in v.context)
        for other in v.consequences:
            if other.summary is None:
                state = other.state.value if other.state is not None else "unknown"
                out.append(f"node {other.node}: no error of its own ({state}): it went quiet")
            else:
                ranks = f" on ranks {', '.join(other.ranks)}" if other.ranks else ""
                out.append(f"node {other.node}{ranks}, a consequence: {other.summary}")
    out.append(f"  ({v.lines_read} lines, {v.bytes_read} bytes read)")
    return "\n".join(out)


def _num(value: object) -> str:
    return (
        f"{value:g}"
        if isinstance(value, float)
        else str(dict(value) if isinstance(value, Mapping) else value)
    )


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
