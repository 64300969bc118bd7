"""A message ready to send: the body a service expects, its headers, and the path it goes to."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Message", "Options", "target_url"]

# A notifier's settings besides its URL, from config: chat_id, routing_key, template, token, ...
Options = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """What one service receives for one alert.

    Exactly one of `json` (sent as UTF-8 JSON) and `text` (sent as UTF-8 text/plain) is set.
    """

    json: Any = None
    text: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    path: str | None = None  # appended to the configured URL unless it already ends with it
    content_type: str | None = None  # of `text`: text/plain unless a template says otherwise

    def body(self) -> tuple[bytes, str]:
        """The bytes on the wire and their Content-Type."""
        if self.text is not None:
            return self.text.encode("utf-8"), self.content_type or "text/plain; charset=utf-8"
        return (
            json.dumps(self.json, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
            "application/json; charset=utf-8",
        )


def target_url(url: str, path: str | None) -> str:
    """`url` with `path` appended to its path (keeping the query), unless the path already ends with it."""
    if not path:
        return url
    parts = urlsplit(url.strip())
    if parts.path.rstrip("/").endswith(path.rstrip("/")):
        return url
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))
