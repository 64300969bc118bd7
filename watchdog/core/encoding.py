"""Encoding: a log written as UTF-16 (PowerShell's `>`) or with a byte-order mark, read as UTF-8 (pure).

The first bytes decide: a UTF-16 BOM (or ASCII with every other byte NUL) turns on a decoder for the whole
log; a UTF-8 BOM is dropped; anything else passes through untouched.
"""

from __future__ import annotations

import codecs

__all__ = ["Transcoder"]

_DECIDE = 4  # bytes needed to tell UTF-16 from UTF-8


class Transcoder:
    """Turns a log's bytes into UTF-8, however they were encoded; see the module docstring."""

    __slots__ = ("_decoder", "_head", "decided", "encoding")

    def __init__(self) -> None:
        self._head = b""  # the first bytes, until there are enough to decide
        self._decoder: codecs.IncrementalDecoder | None = None
        self.decided = False
        self.encoding = "utf-8"

    def feed(self, data: bytes) -> bytes:
        """The UTF-8 bytes of the next `data` (some may be held back until they can be decoded)."""
        if self.decided:
            return (
                data if self._decoder is None else self._decoder.decode(data).encode("utf-8", "surrogatepass")
            )
        self._head += data
        return b"" if len(self._head) < _DECIDE else self._decide(self._head)

    def flush(self) -> bytes:
        """End of the log: what was held back."""
        if not self.decided:
            return self._decide(self._head)
        if self._decoder is None:
            return b""
        return self._decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")

    def _decide(self, head: bytes) -> bytes:
        self.decided, self._head = True, b""
        if head.startswith(codecs.BOM_UTF8):
            return head[len(codecs.BOM_UTF8) :]
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            self.encoding = "utf-16"  # the BOM says which end first, and is dropped
        elif len(head) >= _DECIDE and head[1] == 0 and head[3] == 0 and head[0] and head[2]:
            self.encoding = "utf-16-le"
        elif len(head) >= _DECIDE and head[0] == 0 and head[2] == 0 and head[1] and head[3]:
            self.encoding = "utf-16-be"
        else:
            return head
        self._decoder = codecs.getincrementaldecoder(self.encoding)("replace")
        return self._decoder.decode(head).encode("utf-8", "surrogatepass")
