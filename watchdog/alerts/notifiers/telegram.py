"""Telegram: the bot API's sendMessage, HTML text (bold title, fields, the traceback end in <pre>)."""

from __future__ import annotations

import html
from typing import Any

from watchdog.alerts.alert import Alert
from watchdog.alerts.compose import (
    cut,
    evidence,
    fields,
    fit,
    headline,
    inert,
    lead,
    traceback_tail,
    utf16_len,
)
from watchdog.alerts.message import Message, Options
from watchdog.exceptions import DeliveryError

__all__ = ["MAX_TEXT", "PATH", "build"]

PATH = "/sendMessage"  # appended to https://api.telegram.org/bot<token>
# Telegram's limit on a message's text after entity parsing, in UTF-16 code units (an emoji counts two):
# the HTML sent is kept within it, tags and escapes included, so the text parsed from it is too.
MAX_TEXT = 4096


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
    limit = MAX_TEXT
    text = "\n".join(head)
    for name, value in fields(alert):
        line = f"\n<b>{_escaped(name, 60)}:</b> {_escaped(value, 200)}"
        # fields fill at most about two thirds, so that the traceback's end keeps room
        if utf16_len(text) + utf16_len(line) + utf16_len(tail) > limit * 2 // 3:
            break
        text += line
    lines = evidence(alert)
    room = limit - utf16_len(text) - utf16_len(tail) - len("\n<pre></pre>")
    if lines and room > 80:
        code = fit(lambda n: _html(inert(traceback_tail(lines, n))), room, utf16_len)
        text += "\n<pre>" + code + "</pre>"
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
    """`text` made `inert` (`@user` would be a mention), cut and escaped within `limit` UTF-16 units
    (escaping may lengthen it fivefold, an emoji counts two)."""
    return fit(lambda n: _html(inert(cut(text, n))), limit, utf16_len)
