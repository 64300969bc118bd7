"""What an alert says, as plain parts each service lays out its own way: headline, fields, cut texts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.vocabulary import format_duration

__all__ = [
    "COLOUR",
    "EMOJI",
    "cut",
    "evidence",
    "fields",
    "fit",
    "headline",
    "lead",
    "plain_text",
    "traceback_tail",
]

# One colour per kind, the same in every service that shows one (RGB).
COLOUR: dict[AlertKind, int] = {
    AlertKind.CRASHED: 0xD0021B,  # red
    AlertKind.STALLED: 0xF5A623,  # orange
    AlertKind.UNREACHABLE: 0x9013FE,  # purple: not the launch's fault, maybe
    AlertKind.READY: 0x2EB67D,  # green
    AlertKind.RESOLVED: 0x2EB67D,  # green
    AlertKind.REPLACED: 0x4A90E2,  # blue: news, not trouble
}

EMOJI: dict[AlertKind, str] = {
    AlertKind.CRASHED: "\N{LARGE RED CIRCLE}",
    AlertKind.STALLED: "\N{LARGE ORANGE CIRCLE}",
    AlertKind.UNREACHABLE: "\N{LARGE PURPLE CIRCLE}",
    AlertKind.READY: "\N{LARGE GREEN CIRCLE}",
    AlertKind.RESOLVED: "\N{WHITE HEAVY CHECK MARK}",
    AlertKind.REPLACED: "\N{LARGE BLUE CIRCLE}",
}

_ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
# A traceback line longer than this is cut on its own: one 10 kB line must not push out the others.
_LINE_CHARS = 400


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, ending in an ellipsis when it was cut."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    return text[: limit - 1] + _ELLIPSIS


def fit(render: Callable[[int], str], limit: int) -> str:
    """The longest `render(budget)` that is at most `limit` characters long.

    `render` cuts its raw text to `budget` characters and then escapes or decorates it, which may make it
    longer: the budget shrinks in proportion to the overflow until the result fits.
    """
    budget = limit
    while True:
        text = render(budget)
        if len(text) <= limit:
            return text
        if budget <= 0:
            return text[:limit]
        budget = min(budget - 1, budget * limit // len(text))


def fit_json(body: Callable[[int], Any], max_bytes: int, traceback_chars: int) -> Any:
    """`body(traceback_chars)` with the traceback halved until its UTF-8 JSON is at most `max_bytes` (or no
    traceback is left): for the services with a limit on the whole message."""
    while True:
        made = body(traceback_chars)
        if len(json.dumps(made, ensure_ascii=False).encode("utf-8")) <= max_bytes or traceback_chars == 0:
            return made
        traceback_chars //= 2


def traceback_tail(lines: Sequence[str], max_chars: int, *, line_chars: int = _LINE_CHARS) -> str:
    """The end of a traceback in at most `max_chars` characters, lines joined by newlines.

    The end is what decides (the exception line, the frame that raised), so lines are dropped from the
    start; when any are, the first line says `... (cut, N more lines)`. A single over-long line is cut
    at `line_chars` (and at `max_chars`).
    """
    if max_chars <= 0 or not lines:
        return ""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        piece = cut(line.rstrip(), line_chars)
        cost = len(piece) + (1 if kept else 0)
        # room for the note that lines were cut, if more lines remain above this one
        note = len(_cut_note(len(lines))) + 1 if len(kept) + 1 < len(lines) else 0
        if used + cost + note > max_chars:
            break
        kept.append(piece)
        used += cost
    if not kept:
        # not even the last line fits with the note: as much of the last line as fits beside the note
        if len(lines) == 1:
            return cut(lines[-1].rstrip(), max_chars)
        said = _cut_note(len(lines) - 1)
        if len(said) + 2 > max_chars:
            return cut(lines[-1].rstrip(), max_chars)
        return said + "\n" + cut(lines[-1].rstrip(), max_chars - len(said) - 1)
    kept.reverse()
    dropped = len(lines) - len(kept)
    if dropped:
        kept.insert(0, _cut_note(dropped))
    return "\n".join(kept)


def _cut_note(dropped: int) -> str:
    return f"... (cut, {dropped} more line{'s' if dropped != 1 else ''})"


def headline(alert: Alert) -> str:
    """The kind's emoji and the title: the notification line of every service."""
    return f"{EMOJI[alert.kind]} {alert.title}"


def evidence(alert: Alert, *, fenced: bool = False) -> tuple[str, ...]:
    """The lines shown as code: a crash's traceback, a stall's last line. `fenced`: a Markdown fence in a
    log line (which would end the code block) becomes `'''`."""
    if alert.kind is AlertKind.CRASHED:
        lines = alert.traceback
    elif alert.kind is AlertKind.STALLED and alert.last_line:
        lines = (alert.last_line,)
    else:
        return ()
    return tuple(line.replace("```", "'''") for line in lines) if fenced else lines


def lead(alert: Alert) -> str:
    """The first sentence under the title: the root cause, the stall, the news."""
    if alert.kind is AlertKind.CRASHED:
        return alert.summary or alert.detail or "the launch ended with no error line"
    if alert.kind is AlertKind.STALLED:
        return alert.summary
    if alert.kind is AlertKind.READY:
        if alert.time_since_start is None:
            return "ready to serve"
        text = f"ready after {format_duration(alert.time_since_start)}"
        if alert.usual_seconds:
            text += f" (usually {format_duration(alert.usual_seconds)})"
        return text
    if alert.kind is AlertKind.UNREACHABLE:
        return alert.detail or "the host cannot be reached"
    if alert.kind is AlertKind.REPLACED:
        return alert.detail or f"a new launch began (incarnation {alert.incarnation})"
    return alert.detail or f"the {alert.problem.value} alert no longer holds"


def fields(alert: Alert) -> list[tuple[str, str]]:
    """Short (name, value) pairs in reading order; empty values are left out."""
    out: list[tuple[str, str]] = [
        ("Launch", alert.launch),
        ("Host", alert.host or "local"),
        ("Engine", alert.engine),
        ("Phase", alert.phase),
    ]
    if alert.time_in_phase is not None and alert.kind in {AlertKind.CRASHED, AlertKind.STALLED}:
        out.append(("Time in phase", format_duration(alert.time_in_phase)))
    if alert.time_since_start is not None:
        name = "Time to ready" if alert.kind is AlertKind.READY else "Since start"
        out.append((name, format_duration(alert.time_since_start)))
    if alert.category:
        out.append(("Category", alert.category))
    if alert.ranks:
        out.append(("Ranks", ", ".join(alert.ranks)))
    if alert.kind is AlertKind.STALLED and alert.detail:
        out.append(("Stalled", alert.detail))
    out.extend(alert.facts)
    return [(name, value) for name, value in out if value]


def plain_text(alert: Alert, *, traceback_chars: int = 1500) -> str:
    """The alert as plain text (a console, ntfy, a template's `{text}`)."""
    out = [headline(alert), lead(alert)]
    if alert.hint:
        out.append(f"hint: {alert.hint}")
    out.append(" | ".join(f"{name}: {value}" for name, value in fields(alert)))
    if alert.kind is AlertKind.STALLED and alert.last_line:
        out.append(f"last line: {alert.last_line}")
    if alert.traceback and alert.kind is AlertKind.CRASHED:
        out.append(traceback_tail(alert.traceback, traceback_chars))
    if alert.link:
        out.append(alert.link)
    return "\n".join(line for line in out if line)
