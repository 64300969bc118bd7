"""The status page: one self-contained HTML document (inline CSS and JS, no external assets; its log text is
untrusted: docs/architecture.md, "The status page")."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from watchdog.core.facts import catalogue
from watchdog.vocabulary import PROBLEM_STATES, PROGRESS_STATES

REFRESH_MS = 2000

# The page itself, package data: HTML, CSS and JS with @NONCE@, @REFRESH@, @PHASES@, @FACTS@, @PROBLEMS@
# and @DATA@ filled in by `render_page`.
_PAGE = (resources.files(__package__) / "statuspage.html").read_text(encoding="utf-8")


_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _script_json(payload: Any) -> str:
    """JSON that is inert inside a <script> element: `<`, `>`, `&` and the JS line separators escaped."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).translate(_SCRIPT_ESCAPES)


_PHASES_JSON = json.dumps([s.value for s in PROGRESS_STATES])
_PROBLEMS_JSON = json.dumps([s.value for s in PROBLEM_STATES])
_FACTS_JSON = json.dumps(catalogue())


def render_page(statuses: list[dict[str, Any]], *, nonce: str) -> str:
    """The status page with `statuses` (the /status list) drawn at once; `nonce` marks its own script and
    style for the Content-Security-Policy (URL-safe characters only)."""
    if not nonce.replace("-", "").replace("_", "").isalnum():
        raise ValueError("the nonce must be URL-safe base64")
    return (
        _PAGE.replace("@NONCE@", nonce)
        .replace("@REFRESH@", str(REFRESH_MS))
        .replace("@PHASES@", _PHASES_JSON)
        .replace("@FACTS@", _FACTS_JSON)
        .replace("@PROBLEMS@", _PROBLEMS_JSON)
        .replace("@DATA@", _script_json(statuses))
    )
