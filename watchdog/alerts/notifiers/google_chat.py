"""Google Chat: a space webhook message with a cardsV2 card (header, coloured lead, fields, traceback)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from watchdog.alerts.alert import Alert
from watchdog.alerts.compose import (
    COLOUR,
    cut,
    evidence,
    fields,
    fit,
    fit_json,
    headline,
    inert,
    lead,
    traceback_tail,
)
from watchdog.alerts.message import Message, Options

__all__ = ["MAX_BYTES", "MAX_TEXT", "build"]

MAX_TEXT = 4096  # a message's text
MAX_BYTES = 32_000  # a whole message, card included
_PARAGRAPH = 4000


def build(alert: Alert, options: Options) -> Message:
    """The webhook body: `text` (the notification line) and `cardsV2: [{cardId, card}]`."""
    return Message(json=fit_json(lambda chars: _body(alert, chars), MAX_BYTES, 4000))


def _body(alert: Alert, traceback_chars: int) -> dict[str, Any]:
    colour = f"#{COLOUR[alert.kind]:06X}"
    head_widgets: list[dict[str, Any]] = [
        _paragraph(lambda n: f'<font color="{colour}"><b>{_html(cut(lead(alert), n))}</b></font>'),
    ]
    if alert.hint:
        head_widgets.append(_paragraph(lambda n: f"<b>Hint:</b> {_html(cut(alert.hint, n))}"))
    sections: list[dict[str, Any]] = [
        {"widgets": head_widgets},
        {
            "header": "Details",
            "widgets": [
                {
                    "decoratedText": {
                        "topLabel": cut(name, 100),
                        "text": _html(cut(value, 300)),
                        "wrapText": True,
                    }
                }
                for name, value in fields(alert)[:40]
            ],
        },
    ]
    lines = evidence(alert)
    if lines and traceback_chars:
        budget = min(traceback_chars, _PARAGRAPH)
        text = fit(lambda n: _html(traceback_tail(lines, n)).replace("\n", "<br>"), budget)
        sections.append(
            {
                "header": "Traceback (end)",
                "collapsible": False,
                "widgets": [{"textParagraph": {"text": text}}],
            }
        )
    if alert.link:
        sections.append(
            {
                "widgets": [
                    {
                        "buttonList": {
                            "buttons": [{"text": "Status page", "onClick": {"openLink": {"url": alert.link}}}]
                        }
                    }
                ]
            }
        )
    subtitle = " · ".join(x for x in (alert.engine, alert.host or "local", alert.phase) if x)
    return {
        "text": cut(headline(alert), MAX_TEXT),
        "cardsV2": [
            {
                "cardId": "watchdog-alert",
                "card": {
                    "header": {"title": cut(alert.title, 200), "subtitle": cut(subtitle, 200)},
                    "sections": sections,
                },
            }
        ],
    }


def _paragraph(render: Callable[[int], str]) -> dict[str, Any]:
    return {"textParagraph": {"text": fit(render, _PARAGRAPH)}}


def _html(text: str) -> str:
    """Chat reads card text as HTML (b, i, font, a, br): log text is escaped, and `inert`."""
    return html.escape(inert(text), quote=False)
