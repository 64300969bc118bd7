"""Credentials in log text (API keys, tokens, passwords, URL user:password@) replaced by `<redacted>`.

Applied once, where a launch's status and verdict leave the follow layer (`LaunchFollower`): the store, the
alerts, /status, the status page and the CLI all get the redacted text. A follower's checkpoint (its analyzer's
state, raw lines and all) is saved with `mask_secrets`, which keeps every length (the analyzer's offsets into
its buffers stay right). Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["mask_secrets", "redact", "redact_mapping", "redact_text"]

# Log text is untrusted and sometimes carries credentials: engines print their arguments (SGLang's
# `server_args=ServerArgs(... api_key='...')`, vLLM's `non-default args: {'api_key': ...}`).
_KEY = r"(?:api[_-]?key|access[_-]?key|token|secret|password|passwd|credentials?|authorization)"
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # first, so that "Authorization: Bearer X" loses X, not the word Bearer
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), r"\1 <redacted>"),
    # key = value, key: value, 'key': 'value' (a name that merely contains the word, e.g. num_tokens, is kept)
    (
        re.compile(
            rf"""(\b(?:[A-Za-z0-9]+[_-])*{_KEY}\b['"]?\s*[=:]\s*['"]?)(?!(?:None|null|<redacted>)\b)([^\s'",)}}\]]+)""",
            re.IGNORECASE,
        ),
        r"\1<redacted>",
    ),
    # --api-key VALUE on a command line
    (re.compile(rf"(--(?:[a-z0-9]+-)*{_KEY}\s+)(\S+)", re.IGNORECASE), r"\1<redacted>"),
    # user:password@ in a URL
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/:@]+:[^\s/@]+@", re.IGNORECASE), r"\1<redacted>@"),
    # well-known token shapes: Hugging Face, OpenAI-style, GitHub, Slack
    (
        re.compile(
            r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})"
        ),
        "<redacted>",
    ),
)


# most text has none of these: substring tests decide that fast, so a 200-launch /status costs milliseconds
_MAYBE_SECRET = (
    "key",
    "token",
    "secret",
    "passw",
    "cred",
    "auth",
    "bearer",
    "basic",
    "://",
    "hf_",
    "sk-",
    "gh",
    "xox",
)


_Text = TypeVar("_Text", str, bytes, bytearray)

_CACHED_CHARS = 4096  # texts up to this long are remembered: a status repeats the same lines at every call


def redact_text(text: str) -> str:
    """`text` with anything that looks like a credential replaced by `<redacted>`."""
    if len(text) <= _CACHED_CHARS:
        return _redact_cached(text)
    return _redact(text)


@functools.lru_cache(maxsize=8192)  # at most 8192 x 4 KiB
def _redact_cached(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    lowered = text.lower()
    if not any(word in lowered for word in _MAYBE_SECRET):
        return text
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def mask_secrets(value: _Text) -> _Text:
    """`value` with every character of anything that looks like a credential (as `redact_text` finds them)
    replaced by `*`, keeping its length: the same object when there is none. Bytes are read as Latin-1 (one
    character per byte), so every offset into them stays right."""
    text = value if isinstance(value, str) else value.decode("latin-1")
    lowered = text.lower()
    if not any(word in lowered for word in _MAYBE_SECRET):
        return value
    chars: list[str] | None = None
    for pattern, _ in _SECRET_PATTERNS:
        for match in pattern.finditer(text):
            # the secret: after the pattern's first group (the key, `--api-key `, `Bearer `, `scheme://`)
            for i in range(match.end(1) if pattern.groups else match.start(), match.end()):
                if text[i] not in "*@" and not text[i].isspace():
                    if chars is None:
                        chars = list(text)
                    chars[i] = "*"
    if chars is None:
        return value
    masked = "".join(chars)
    if isinstance(value, str):
        return masked
    return type(value)(masked.encode("latin-1"))


def redact(value: Any) -> Any:
    """`value` (a JSON-like object: str, dict, list, tuple, numbers) with every string `redact_text`ed: a new
    object where anything changed (lists stay lists, tuples become lists)."""
    kind = type(value)  # exact types first: a status has ~200 nodes and is redacted at every snapshot
    if kind is str:
        return _redact_cached(value) if len(value) <= _CACHED_CHARS else _redact(value)
    if kind is dict:
        return {k: redact(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def redact_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    """A status or verdict object (a new dict) with every string in it `redact_text`ed."""
    return {k: redact(v) for k, v in value.items()}
