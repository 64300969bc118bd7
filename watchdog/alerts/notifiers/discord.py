"""Discord: a webhook message with one embed (title, colour by kind, inline fields, the traceback end)."""

from __future__ import annotations

import re

from watchdog.alerts.alert import Alert, rfc3339
from watchdog.alerts.compose import COLOUR, cut, evidence, fields, fit, headline, inert, lead, traceback_tail
from watchdog.alerts.message import Message, Options

__all__ = ["MAX_DESCRIPTION", "MAX_EMBED_TOTAL", "MAX_FIELDS", "MAX_FIELD_VALUE", "MAX_TITLE", "build"]

# Discord's embed limits.
MAX_TITLE = 256
MAX_DESCRIPTION = 4096
MAX_FIELDS = 25
MAX_FIELD_NAME = 256
MAX_FIELD_VALUE = 1024
MAX_FOOTER = 2048
MAX_EMBED_TOTAL = 6000  # title + description + field names and values + footer + author
# What a field value is cut to here: an inline field is a short thing; long facts would crowd the card.
_FIELD_VALUE_CHARS = 200
_MIN_DESCRIPTION = 2500  # the lead, the hint and the traceback's end

_MARKDOWN = re.compile(r"([\\*_~`|>])")


def build(alert: Alert, options: Options) -> Message:
    """The webhook body: an embed, and no mentions whatever the log says (`@everyone` stays text)."""
    title = cut(headline(alert), MAX_TITLE)
    footer = cut(f"watchdog · {alert.dedup_key}", MAX_FOOTER)
    embed_fields: list[dict[str, object]] = []
    used = len(title) + len(footer)
    for name, value in fields(alert)[:MAX_FIELDS]:
        field = {
            "name": cut(name, min(MAX_FIELD_NAME, 64)),
            "value": _escaped(value, min(MAX_FIELD_VALUE, _FIELD_VALUE_CHARS)),
            "inline": len(value) <= 40,
        }
        cost = len(str(field["name"])) + len(str(field["value"]))
        if used + cost > MAX_EMBED_TOTAL - _MIN_DESCRIPTION:
            break
        embed_fields.append(field)
        used += cost
    room = min(MAX_DESCRIPTION, MAX_EMBED_TOTAL - used)
    description = _description(alert, room)
    embed: dict[str, object] = {
        "title": title,
        "description": description,
        "color": COLOUR[alert.kind],
        "fields": embed_fields,
        "footer": {"text": footer},
        "timestamp": rfc3339(alert.ended_at or alert.started_at),
    }
    if alert.link:
        embed["url"] = alert.link
    return Message(json={"embeds": [embed], "allowed_mentions": {"parse": []}})


def _description(alert: Alert, room: int) -> str:
    """Lead in bold, the hint, then the traceback end (or the last line of a stall) as a code block."""
    head = fit(lambda n: f"**{_escape(cut(lead(alert), n))}**", min(1000, room // 3))
    if alert.hint:
        head += fit(lambda n: f"\nHint: {_escape(cut(alert.hint, n))}", min(500, room // 6))
    lines = evidence(alert, fenced=True)
    head = cut(head, room)
    left = room - len(head) - len("\n```\n\n```")
    if not lines or left < 80:
        return head
    return head + "\n```\n" + fit(lambda n: inert(traceback_tail(lines, n)), left) + "\n```"


def _escaped(text: str, limit: int) -> str:
    return fit(lambda n: _escape(cut(text, n)), limit)


def _escape(text: str) -> str:
    """Log text shown as text: `__init__` must not turn bold, `[Fix](https://...)` not a link, `@everyone`
    and `<@123>` not a mention (even if `allowed_mentions` were lost on the way)."""
    return _MARKDOWN.sub(r"\\\1", inert(text))
