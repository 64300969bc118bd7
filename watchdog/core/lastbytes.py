"""The last N bytes of a stream, kept as the pieces read and joined when asked.

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
        value = value[-self.size :] if len(value) > self.size else value
        self._pieces, self._held = ([value] if value else []), len(value)

    def feed(self, data: bytes) -> None:
        """The stream's next bytes."""
        if len(data) >= self.size:
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
