"""Microsoft Teams: a Workflows webhook ("Post to a channel when a webhook request is received") with an
Adaptive Card attachment; the retired Office 365 connectors' MessageCard is not used."""

from __future__ import annotations

from typing import Any

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.compose import cut, evidence, fields, fit_json, headline, inert, lead, traceback_tail
from watchdog.alerts.message import Message, Options

__all__ = ["CARD_VERSION", "CONTENT_TYPE", "MAX_BYTES", "build"]

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_VERSION = "1.4"  # 1.5 renders too, but 1.4 is what every Teams client (and Workflows) accepts
MAX_BYTES = 28_000  # a Teams message is at most about 28 KB, card included

# The TextBlock colour per kind: Adaptive Cards name colours by meaning, not by value.
_COLOUR = {
    AlertKind.CRASHED: "Attention",
    AlertKind.STALLED: "Warning",
    AlertKind.UNREACHABLE: "Warning",
    AlertKind.READY: "Good",
    AlertKind.RESOLVED: "Good",
    AlertKind.REPLACED: "Accent",
}
_STYLE = {kind: colour.lower() for kind, colour in _COLOUR.items()}  # the container's style


def build(alert: Alert, options: Options) -> Message:
    """The webhook body: `{"type": "message", "attachments": [{contentType, content: AdaptiveCard}]}`."""
    return Message(json=fit_json(lambda chars: _body(alert, chars), MAX_BYTES, 6000))


def _body(alert: Alert, traceback_chars: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {
            "type": "Container",
            "style": _STYLE[alert.kind],
            "bleed": True,
            "items": [
                {
                    "type": "TextBlock",
                    "text": cut(headline(alert), 300),
                    "size": "Large",
                    "weight": "Bolder",
                    "color": _COLOUR[alert.kind],
                    "wrap": True,
                }
            ],
        },
        _rich(inert(cut(lead(alert), 2000)), weight="Bolder"),
    ]
    if alert.hint:
        items.append(_rich(f"Hint: {inert(cut(alert.hint, 1000))}"))
    items.append(
        {
            "type": "FactSet",
            "facts": [
                {"title": cut(name, 100), "value": _plain(cut(value, 300))}
                for name, value in fields(alert)[:40]
            ],
        }
    )
    lines = evidence(alert)
    if lines and traceback_chars:
        tail = inert(traceback_tail(lines, traceback_chars))
        items.append(_rich(tail, fontType="Monospace", size="Small"))
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "body": items,
        "msteams": {"width": "Full"},
    }
    if alert.link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Status page", "url": alert.link}]
    return {
        "type": "message",
        "attachments": [{"contentType": CONTENT_TYPE, "contentUrl": None, "content": card}],
    }


def _rich(text: str, **style: str) -> dict[str, Any]:
    """A RichTextBlock: its TextRun shows log text as it is (a TextBlock would read `__init__` as bold)."""
    return {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": text, **style}]}


def _plain(text: str) -> str:
    """FactSet values read a subset of Markdown: keep log text from turning into emphasis or a link."""
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")
    return inert(text)
