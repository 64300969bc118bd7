"""ntfy: a POST to the topic URL, the text as the body, title, priority, tags and link as headers."""

from __future__ import annotations

import base64

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.compose import cut, plain_text
from watchdog.alerts.message import Message, Options

__all__ = ["MAX_BODY_BYTES", "build"]

MAX_BODY_BYTES = 4096  # past this ntfy turns the message into an attachment (or refuses it)

_PRIORITY = {
    AlertKind.CRASHED: "urgent",
    AlertKind.STALLED: "high",
    AlertKind.UNREACHABLE: "high",
    AlertKind.READY: "default",
    AlertKind.RESOLVED: "default",
    AlertKind.REPLACED: "low",
}
# ntfy shows a tag that is an emoji short code as the emoji.
_TAGS = {
    AlertKind.CRASHED: "rotating_light",
    AlertKind.STALLED: "hourglass",
    AlertKind.UNREACHABLE: "electric_plug",
    AlertKind.READY: "white_check_mark",
    AlertKind.RESOLVED: "heavy_check_mark",
    AlertKind.REPLACED: "arrows_counterclockwise",
}


def build(alert: Alert, options: Options) -> Message:
    """The request: a text body within ntfy's size, `Title`, `Priority`, `Tags`, `Click` headers.

    Options: `token` (an access token, sent as a Bearer Authorization header), `priority` (overrides).
    """
    tags = [_TAGS[alert.kind], alert.kind.value]
    if alert.category:
        tags.append(alert.category)
    headers = {
        "Title": _header(cut(alert.title, 250)),
        "Priority": str(options.get("priority") or _PRIORITY[alert.kind]),
        "Tags": _header(",".join(tags)),
    }
    if alert.link:
        headers["Click"] = alert.link
    if options.get("token"):
        headers["Authorization"] = f"Bearer {options['token']}"
    chars = 1500
    while True:
        body = plain_text(alert, traceback_chars=chars).split("\n", 1)[-1]  # the title is a header already
        if len(body.encode("utf-8")) <= MAX_BODY_BYTES:
            return Message(text=body, headers=headers)
        chars //= 2
        if chars < 50:
            cut_body = body.encode("utf-8")[: MAX_BODY_BYTES - 3].decode("utf-8", "ignore") + "..."
            return Message(text=cut_body, headers=headers)


def _header(value: str) -> str:
    """An HTTP header holds ASCII: other text goes as an RFC 2047 encoded word, which ntfy decodes."""
    value = " ".join(value.split())  # no line breaks in a header
    if value.isascii():
        return value
    return "=?UTF-8?B?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="
