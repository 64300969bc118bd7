"""The last N bytes of a stream, kept as the pieces read and joined when asked; or its whole lines among them.

A live log is read a line at a time; keeping its last 8 KB by `(kept + data)[-N:]` copies the 8 KB at each line.
Here a piece is appended, and the pieces are joined (and cut to N) only when asked or once they hold a quarter
more than N: a byte read is copied about four times in all, and a stream keeps at most 1.25 N bytes.
"""

from __future__ import annotations


class LastBytes:
    """The last `size` bytes fed (fewer while fewer were fed)."""

    __slots__ = ("_held", "_joined_at", "_pieces", "size")

    def __init__(self, size: int, value: bytes = b"") -> None:
        self.size = size
        self._joined_at = size + size // 4  # bytes held that make `feed` join the pieces
        self._pieces: list[bytes] = []
        self._held = 0  # bytes in _pieces
        self.set(value)

    def set(self, value: bytes) -> None:
        """Keep `value`'s last `size` bytes, and nothing before them."""
        value = self._cut(value) if len(value) > self.size else value
        self._pieces, self._held = ([value] if value else []), len(value)

    def _cut(self, value: bytes) -> bytes:
        # what is kept of `value`, longer than `size`
        return value[-self.size :]

    def feed(self, data: bytes) -> None:
        """The stream's next bytes."""
        # (not at exactly `size`: the byte before such a window says where a `LastLines` first line begins)
        if len(data) > self.size:
            self.set(data)
        elif data:
            self._pieces.append(data)
            self._held += len(data)
            if self._held >= self._joined_at:
                self.set(b"".join(self._pieces))

    @property
    def value(self) -> bytes:
        """The last `size` bytes fed."""
        if len(self._pieces) > 1 or self._held > self.size:
            self.set(b"".join(self._pieces))
        return self._pieces[0] if self._pieces else b""


class LastLines(LastBytes):
    """The lines of the last `size` bytes fed that begin within them (the unfinished last one included): a
    line cut by the window is left out, unless no line begins after the cut (one line longer than `size`:
    then its last `size` bytes). The value depends only on the bytes fed, not on how they were cut into pieces
    or when it was asked, so that a copy made from it (`LastLines(size, value)`) and fed the same bytes goes
    on with the same values: what a checkpoint restores. A cut line's words are no line's: a log's last
    bytes kept without its first, cut line hold no `ew-token: 307` (SGLang's `#new-token`) that reads as
    a credential's name."""

    __slots__ = ()

    def _cut(self, value: bytes) -> bytes:
        cut = len(value) - self.size
        if value[cut - 1] == 10:  # the window begins a line
            return value[cut:]
        start = value.find(b"\n", cut) + 1
        return value[cut:] if start in (0, len(value)) else value[start:]
