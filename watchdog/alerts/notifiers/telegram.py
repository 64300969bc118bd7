"""Telegram: the bot API's sendMessage, HTML text (bold title, fields, the traceback end in <pre>)."""

from __future__ import annotations

import html
from typing import Any

from watchdog.alerts.alert import Alert
from watchdog.alerts.compose import cut, evidence, fields, fit, headline, lead, traceback_tail
from watchdog.alerts.message import Message, Options
from watchdog.exceptions import DeliveryError

__all__ = ["MAX_TEXT", "PATH", "build"]

PATH = "/sendMessage"  # appended to https://api.telegram.org/bot<token>
MAX_TEXT = 4096  # characters after entity parsing: the HTML sent is kept within it, tags included
# Characters outside the Basic Multilingual Plane (the emoji) count twice in Telegram's UTF-16 length.
_MARGIN = 16


def build(alert: Alert, options: Options) -> Message:
    """The request body: `chat_id`, `text`, `parse_mode: HTML`, no link preview.

    Options: `chat_id` (required), `message_thread_id` (a forum topic).
    """
    chat_id = options.get("chat_id")
    if chat_id in (None, ""):
        raise DeliveryError("telegram needs the option chat_id (the chat, group or channel to post in)")
    title = headline(alert)
    head = [f"<b>{_escaped(title, 300)}</b>", _escaped(lead(alert), 1000)]
    if alert.hint:
        head.append(f"<i>Hint:</i> {_escaped(alert.hint, 600)}")
    tail = f'\n<a href="{html.escape(alert.link, quote=True)}">Status page</a>' if alert.link else ""
    limit = MAX_TEXT - _MARGIN
    text = "\n".join(head)
    for name, value in fields(alert):
        line = f"\n<b>{_escaped(name, 60)}:</b> {_escaped(value, 200)}"
        # fields fill at most about two thirds, so that the traceback's end keeps room
        if len(text) + len(line) + len(tail) > limit * 2 // 3:
            break
        text += line
    lines = evidence(alert)
    room = limit - len(text) - len(tail) - len("\n<pre></pre>")
    if lines and room > 80:
        text += "\n<pre>" + fit(lambda n: _html(traceback_tail(lines, n)), room) + "</pre>"
    body: dict[str, Any] = {
        "chat_id": chat_id,
        "text": text + tail,
        "parse_mode": "HTML",
        "link_preview_options": {"is_disabled": True},
    }
    if options.get("message_thread_id"):
        body["message_thread_id"] = options["message_thread_id"]
    return Message(json=body, path=PATH)


def _html(text: str) -> str:
    """Telegram's HTML mode needs <, > and & escaped, and nothing else."""
    return html.escape(text, quote=False)


def _escaped(text: str, limit: int) -> str:
    """`text` cut and escaped within `limit` characters (escaping may lengthen it fivefold)."""
    return fit(lambda n: _html(cut(text, n)), limit)
