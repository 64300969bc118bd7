"""Slack: an incoming-webhook message in Block Kit (header, section fields, the traceback end as code)."""

from __future__ import annotations

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.compose import cut, evidence, fields, fit, headline, inert, lead, traceback_tail
from watchdog.alerts.message import Message, Options

__all__ = ["MAX_BLOCKS", "MAX_SECTION_TEXT", "build"]

# Slack's Block Kit limits.
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_FALLBACK_TEXT = 3000  # the notification text; Slack truncates far later, phones far sooner


def build(alert: Alert, options: Options) -> Message:
    """The webhook body: `text` (the notification line) and `blocks`."""
    blocks: list[dict[str, object]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": cut(headline(alert), MAX_HEADER_TEXT),
            },
        },
        _section("*", lead(alert), "*"),
    ]
    if alert.hint:
        blocks.append(_section("*Hint:* ", alert.hint))
    pairs = fields(alert)
    for start in range(0, len(pairs), MAX_FIELDS):
        group = pairs[start : start + MAX_FIELDS]
        blocks.append(
            {
                "type": "section",
                "fields": [{"type": "mrkdwn", "text": _field(name, value)} for name, value in group],
            }
        )
    lines = evidence(alert, fenced=True)  # a fence in a log line would end the block
    if lines:
        blocks.append(_code("Traceback (end)" if alert.kind is AlertKind.CRASHED else "Last line", lines))
    if alert.link:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Status page"},
                        "url": alert.link,
                    }
                ],
            }
        )
    if len(blocks) > MAX_BLOCKS:  # only with hundreds of facts: keep the first ones and the link
        blocks = blocks[: MAX_BLOCKS - 1] + blocks[-1:]
    line = f"{headline(alert)}: {lead(alert)}"
    return Message(json={"text": fit(lambda n: _escape(cut(line, n)), MAX_FALLBACK_TEXT), "blocks": blocks})


def _section(before: str, text: str, after: str = "") -> dict[str, object]:
    """A mrkdwn section: `text` escaped and cut to fit with its decoration."""
    return {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": fit(lambda n: before + _escape(cut(text, n)) + after, MAX_SECTION_TEXT),
        },
    }


def _field(name: str, value: str) -> str:
    label = f"*{_escape(cut(name, 100))}*\n"
    return fit(lambda n: label + _escape(cut(value, n)), MAX_FIELD_TEXT)


def _code(label: str, lines: tuple[str, ...]) -> dict[str, object]:
    head = f"*{label}*\n```\n"
    tail = "\n```"
    text = fit(lambda n: head + _escape(traceback_tail(lines, n)) + tail, MAX_SECTION_TEXT)
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _escape(text: str) -> str:
    """Log text as text: Slack's three control characters escaped (its mrkdwn would take `<!channel>` or
    `<@U123>` for a mention, `<https://x|text>` for a link), and `inert` (`@channel`)."""
    return inert(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
