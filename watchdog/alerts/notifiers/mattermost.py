"""Mattermost: an incoming-webhook post, a headline in `text` and one coloured attachment with fields."""

from __future__ import annotations

import re
from typing import Any

from watchdog.alerts.alert import Alert
from watchdog.alerts.compose import COLOUR, cut, evidence, fields, fit, headline, inert, lead, traceback_tail
from watchdog.alerts.message import Message, Options

__all__ = ["MAX_POST_CHARS", "build"]

MAX_POST_CHARS = 16_383  # Mattermost's post size limit (text and attachments together, to be safe)
_ATTACHMENT_TEXT = 8_000
_MARKDOWN = re.compile(r"([\\*_~`|>#\[\]])")


def build(alert: Alert, options: Options) -> Message:
    """The webhook body: `text`, `attachments: [{fallback, color, title, title_link, text, fields}]`."""
    title = cut(headline(alert), 250)
    text = f"**{_escaped(lead(alert), 1000)}**"
    if alert.hint:
        text += f"\nHint: {_escaped(alert.hint, 1000)}"
    field_list: list[dict[str, Any]] = [
        {"short": len(value) <= 40, "title": cut(name, 100), "value": _escaped(value, 300)}
        for name, value in fields(alert)[:40]
    ]
    used = len(title) * 2 + len(text) + sum(len(str(f["title"])) + len(str(f["value"])) for f in field_list)
    lines = evidence(alert, fenced=True)
    room = min(_ATTACHMENT_TEXT, MAX_POST_CHARS - 500 - used) - len(text) - len("\n```\n\n```")
    if lines and room > 80:
        text += "\n```\n" + fit(lambda n: inert(traceback_tail(lines, n)), room) + "\n```"
    attachment: dict[str, Any] = {
        "fallback": title,
        "color": f"#{COLOUR[alert.kind]:06X}",
        "title": title,
        "text": text,
        "fields": field_list,
        "footer": f"watchdog · {alert.dedup_key}",
    }
    if alert.link:
        attachment["title_link"] = alert.link
    body: dict[str, Any] = {"text": f"#### {_escape(title)}", "attachments": [attachment]}
    for key in ("channel", "username", "icon_url"):
        if options.get(key):
            body[key] = str(options[key])
    return Message(json=body)


def _escape(text: str) -> str:
    """Log text as text: no Markdown, no `@channel`/`@here`/`@all`/`@user` mention (Mattermost notifies
    for a mention in a webhook's post; the Markdown escape does not stop it: a zero-width space does)."""
    return _MARKDOWN.sub(r"\\\1", inert(text))


def _escaped(text: str, limit: int) -> str:
    return fit(lambda n: _escape(cut(text, n)), limit)
