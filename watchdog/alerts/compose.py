"""What an alert says, as plain parts each service lays out its own way, its log text made inert."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from watchdog.alerts.alert import Alert, AlertKind, FactValue
from watchdog.core.facts import describe, fact_text
from watchdog.vocabulary import format_duration

__all__ = [
    "COLOUR",
    "EMOJI",
    "cut",
    "evidence",
    "fact_field",
    "fields",
    "fit",
    "headline",
    "inert",
    "lead",
    "plain_text",
    "traceback_tail",
    "utf16_len",
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


# What a chat service would act on in log text: a mention (`@channel`, `@here`, `@all`, `@everyone`,
# `@user`; Slack's `<!channel>` and `<@U123>`, Discord's `<@123>`, `<@&456>`, `<#789>`), a link whose text
# hides where it goes: Markdown's `[Fix](https://evil.example/fix.sh)`, Slack's `<https://evil|Fix>`
# (Mattermost's webhooks read it too).
_MENTION = re.compile(r"@(?=[\w&!#])|<(?=[!@#]|[a-z][a-z0-9+.-]*:)", re.IGNORECASE)
_MASKED_LINK = re.compile(r"\](?=\s*\()")
_ZWSP = "\N{ZERO WIDTH SPACE}"


def inert(text: str) -> str:
    """Log text that no chat service reads as a mention or a link: a zero-width space after the `@` (or
    the `<`) of a mention or a `<scheme:` link, and between a Markdown link's `]` and `(`, where no
    service's parser still sees one. What a person reads is unchanged."""
    text = _MENTION.sub(lambda m: m.group(0) + _ZWSP, text)
    return _MASKED_LINK.sub("]" + _ZWSP, text)


def utf16_len(text: str) -> int:
    """The length in UTF-16 code units, as Telegram (and JavaScript) count it: an emoji counts twice."""
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, ending in an ellipsis when it was cut."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    return text[: limit - 1] + _ELLIPSIS


def fit(render: Callable[[int], str], limit: int, measure: Callable[[str], int] = len) -> str:
    """The longest `render(budget)` that is at most `limit` long, as `measure` counts (characters).

    `render` cuts its raw text to `budget` characters and then escapes or decorates it, which may make it
    longer: the budget shrinks in proportion to the overflow until the result fits.
    """
    budget = limit
    while True:
        text = render(budget)
        size = measure(text)
        if size <= limit:
            return text
        if budget <= 0:
            while text and measure(text) > limit:
                text = text[: max(0, min(len(text) - 1, limit))]
            return text
        budget = min(budget - 1, budget * limit // size)


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
        said = _cut_note(len(lines) - 1)
        if len(lines) == 1 or len(said) + 2 > max_chars:
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


# Facts (and progress) are what a crash, a stall or a ready launch is about; not an outage or news.
_WITH_FACTS = frozenset({AlertKind.CRASHED, AlertKind.STALLED, AlertKind.READY})


def fact_field(name: str, value: FactValue) -> tuple[str, str]:
    """A fact as a person reads it (`watchdog.core.facts`): `("avail_mem_after_weights_gb", 16.3)` ->
    ("Free memory after weights", "16.3 GB"); `("kv_cache_tokens", 812345)` -> ("KV cache tokens", "812,345")."""
    return describe(name).label, fact_text(name, value)


def fields(alert: Alert) -> list[tuple[str, str]]:
    """Short (name, value) pairs in reading order, as a person reads them; empty values are left out."""
    out: list[tuple[str, str]] = [
        ("Launch", alert.launch),
        *((("Node", alert.node),) if alert.node else ()),
        ("Host", alert.host or "local"),
        ("Engine", alert.engine),
        # a log that does not exist: the file, not a phase (nothing started)
        ("Log", alert.missing_log) if alert.missing_log else ("Phase", alert.phase),
    ]
    if alert.time_in_phase is not None and alert.kind in {AlertKind.CRASHED, AlertKind.STALLED}:
        name = "Missing for" if alert.missing_log else "Time in phase"
        out.append((name, format_duration(alert.time_in_phase)))
    if alert.time_since_start is not None:
        name = "Time to ready" if alert.kind is AlertKind.READY else "Since start"
        out.append((name, format_duration(alert.time_since_start)))
    if alert.category:
        out.append(("Category", alert.category))
    if alert.ranks:
        out.append(("Ranks", ", ".join(alert.ranks)))
    if alert.kind is AlertKind.CRASHED and alert.node and alert.detail:
        out.append(("Other nodes", alert.detail))
    if alert.kind is AlertKind.STALLED and alert.detail:
        out.append(("Likely" if alert.missing_log else "Stalled", alert.detail))
    if alert.kind in _WITH_FACTS:
        # a relaunch's news, before the facts (a service that shows a few fields shows it): what changed since
        # the launch before. Its values are log text: each service escapes field values as it does the facts'
        out.append(("Changed", alert.changed.removeprefix("changed ")))
        out.extend(
            (f"{name[:1].upper()}{name[1:]} progress", f"{done}/{total}" if total is not None else f"{done}")
            for name, done, total in alert.progress
            if done is not None
        )
        out.extend(fact_field(name, value) for name, value in alert.facts)
    return [(name, value) for name, value in out if value]


def plain_text(alert: Alert, *, traceback_chars: int = 1500) -> str:
    """The alert as plain text (ntfy, apprise, the webhook's `text`), its log text `inert`."""
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
    return inert("\n".join(line for line in out if line))
