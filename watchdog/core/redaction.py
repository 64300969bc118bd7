"""Credentials in log text (API keys, tokens, passwords, URL user:password@) replaced by `<redacted>` (pure).

Applied once, where a status leaves the follower; a checkpoint is saved with `mask_secrets`, which keeps every
length (the analyzer's offsets stay right).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any, TypeVar

__all__ = ["mask_secrets", "may_hold_secret", "redact", "redact_text"]

# Log text is untrusted and sometimes carries credentials: engines print their arguments (SGLang's
# `server_args=ServerArgs(... api_key='...')`, vLLM's `non-default args: {'api_key': ...}`).
_KEY = r"(?:api[_-]?key|access[_-]?key|token|secret|password|passwd|credentials?|authorization)"
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # first, so that "Authorization: Bearer X" loses X, not the word Bearer
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), r"\1 <redacted>"),
    # key = value, key: value, 'key': 'value' (a name that merely contains the word, e.g. num_tokens, is kept;
    # so is a count: SGLang's `#token: 75`, `#new-token: 6`, `#cached-token: 0`, where the name follows a `#`)
    (
        re.compile(
            rf"""((?<![#\w-])-*(?:[A-Za-z0-9]+[_-])*{_KEY}\b['"]?\s*[=:]\s*['"]?)(?!(?:None|null|<redacted>)\b)([^\s'",)}}\]]+)""",
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


_Text = TypeVar("_Text", str, bytes, bytearray)

# Finds at least what `_SECRET_PATTERNS` find, in a text embedded anywhere in other text (a record as JSON):
# the same shapes without their word boundaries and context, and only their first characters of value (case
# ignored). Compiled when first used (`_embedded`): a replay never looks for secrets embedded in a record.
_EMBEDDED = (
    rf"""(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{{8}}"""
    rf"""|{_KEY}['"]?\s*[=:]\s*['"]?(?!(?:None|null|<redacted>)\b)[^\s'",)}}\]]|-{_KEY}\s+\S"""
    r"|://[^\s/:@]+:[^\s/@]+@"
    r"|hf_[A-Za-z0-9]{20}|sk-[A-Za-z0-9_-]{20}|gh[pousr]_[A-Za-z0-9]{20}|xox[abprs]-[A-Za-z0-9-]{10}"
)


# Where a match of `_EMBEDDED` can start (lower case; at the word, or at the `-` just before it): found with
# str.find, which is ~100x faster than a search of the whole pattern over a blob of lines.
_ANCHORS = (
    "apikey", "api_key", "api-key", "accesskey", "access_key", "access-key", "token", "secret", "passw",
    "credential", "authorization", "bearer", "basic", "://", "hf_", "sk-", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "xox",
)  # fmt: skip


# The same over bytes (a blob, a raw buffer): their `lower` is ~15x faster than a Latin-1 str's. In bytes mode
# `\s` and `\b` are ASCII's; the texts looked at are UTF-8, where the difference never shows.
_ANCHORS_BYTES = tuple(anchor.encode() for anchor in _ANCHORS)


@functools.cache
def _embedded() -> re.Pattern[bytes]:
    return re.compile(_EMBEDDED.encode(), re.IGNORECASE)


def _anchored(lowered: bytes) -> Iterator[int]:
    # where a match of `_EMBEDDED` starts in `lowered` (not a count named after a `#`, below)
    match = _embedded().match
    for anchor in _ANCHORS_BYTES:
        at = lowered.find(anchor)
        while at != -1:
            if match(lowered, at):
                if not _counted(lowered, at):
                    yield at
            elif at and match(lowered, at - 1):
                yield at - 1
            at = lowered.find(anchor, at + 1)


_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")


def _counted(lowered: bytes, at: int) -> bool:
    # A `key: value` whose name follows a `#` (SGLang's `#token: 75`, `#new-token: 6`): a count, which the
    # key = value pattern leaves alone. Every serving SGLang log has thousands, and a false "may hold" costs each
    # checkpoint a walk over its record, every text masked.
    start = at
    while start and lowered[start - 1] in _NAME_BYTES:
        start -= 1
    return start > 0 and lowered[start - 1] == ord("#")


def may_hold_secret(data: bytes | bytearray | str) -> bool:
    """Whether `data`, or any text embedded in it (a record as JSON; bytes read as Latin-1), may hold what
    `mask_secrets` masks: a cheap look at a whole blob, false for nearly all of them."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    return next(_anchored(raw.lower()), None) is not None


def mask_secrets(value: _Text) -> _Text:
    """`value` with every character of anything that looks like a credential (as `redact_text` finds them)
    replaced by `*`, keeping its length: the same object when there is none. Bytes are read as Latin-1 (one
    character per byte), so every offset into them stays right. Only the lines around a likely credential
    (`may_hold_secret`) and the next one are searched with the patterns: a few lines, not a whole buffer."""
    # one byte per character: the same offsets
    raw, text = (value.encode("latin-1", "replace"), value) if isinstance(value, str) else (bytes(value), "")
    windows: set[tuple[int, int]] = set()
    for at in _anchored(raw.lower()):
        end = raw.find(b"\n", at)
        end = raw.find(b"\n", end + 1) if end != -1 else -1  # the next line too: a value after a line break
        windows.add((raw.rfind(b"\n", 0, at) + 1, len(raw) if end == -1 else end))
    if windows and not text:
        text = raw.decode("latin-1")
    chars: list[str] | None = None
    for start, end in windows:
        for pattern, _ in _SECRET_PATTERNS:
            for match in pattern.finditer(text, start, end):
                # the secret: after the pattern's first group (the key, `--api-key `, `Bearer `, `scheme://`)
                for i in range(match.end(1) if pattern.groups else match.start(), match.end()):
                    if text[i] not in "*@" and not text[i].isspace():
                        if chars is None:
                            chars = list(text)
                        chars[i] = "*"
    if chars is None:
        return value
    masked = "".join(chars)
    return masked if isinstance(value, str) else type(value)(masked.encode("latin-1"))


_CACHED_CHARS = 4096  # texts up to this long are remembered: a status repeats the same lines at every call


def redact_text(text: str) -> str:
    """`text` with anything that looks like a credential replaced by `<redacted>`."""
    return _redact_cached(text) if len(text) <= _CACHED_CHARS else _redact(text)


@functools.lru_cache(maxsize=8192)  # at most 8192 x 4 KiB
def _redact_cached(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    # most text has no anchor: substring tests decide that fast, so a 200-launch /status costs milliseconds
    lowered = text.lower()
    if not any(word in lowered for word in _ANCHORS):
        return text
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any) -> Any:
    """`value` (a JSON-like object: str, dict, list, tuple, numbers) with every string `redact_text`ed: a new
    object where anything changed (lists stay lists, tuples become lists)."""
    kind = type(value)  # exact types first: a status has ~200 nodes and is redacted at every snapshot
    if kind is str or isinstance(value, str):
        return redact_text(value)
    if kind is dict or isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if kind is list or kind is tuple or isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value
