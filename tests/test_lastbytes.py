"""`LastBytes`: the last N bytes of a stream, whatever the pieces it came in."""

from __future__ import annotations

import random

import pytest

from watchdog.core.lastbytes import LastBytes, LastLines


@pytest.mark.parametrize("seed", range(20))
def test_the_value_is_the_last_bytes_fed_whatever_the_pieces(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([1, 7, 256, 4096])
    start = bytes(rng.randrange(256) for _ in range(rng.randrange(2 * size)))
    last, whole = LastBytes(size, start), start
    for _ in range(300):
        piece = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 80, size - 1, size, 3 * size])))
        last.feed(piece)
        whole += piece
        if rng.random() < 0.2:  # asked now and then (a checkpoint), fed on after
            assert last.value == whole[-size:]
    assert last.value == whole[-size:]


def test_the_pieces_held_stay_within_a_quarter_more_than_the_size() -> None:
    last = LastBytes(1000)
    for _ in range(10_000):
        last.feed(b"x" * 37)
        assert sum(map(len, last._pieces)) < 1250


def _whole_lines(stream: bytes, size: int) -> bytes:
    # what `LastLines` keeps, from the whole stream: the lines that begin within its last `size` bytes
    if len(stream) <= size:
        return stream
    cut = len(stream) - size
    if stream[cut - 1 : cut] == b"\n":
        return stream[cut:]
    start = stream.find(b"\n", cut) + 1
    return stream[cut:] if start in (0, len(stream)) else stream[start:]


@pytest.mark.parametrize("seed", range(30))
def test_the_last_lines_depend_only_on_the_bytes_fed_and_a_copy_goes_on_the_same(seed: int) -> None:
    """Whatever the pieces, whenever asked, and in a copy made from its value (a checkpoint restored) and fed
    the same bytes: the lines that begin within the last `size` bytes (one line longer than the window: its
    last `size` bytes)."""
    rng = random.Random(seed)
    size = rng.choice([8, 64, 256])
    alphabet = b"ab\n" if rng.random() < 0.5 else b"abcdefgh\n"
    stream = b""
    last = LastLines(size)
    copies: list[tuple[LastLines, int]] = []  # a copy and where in the stream it was made
    for _ in range(300):
        piece = bytes(
            rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, size - 1, size, size + 1, 2 * size]))
        )
        if rng.random() < 0.1:
            piece += b"x" * rng.choice([size, 2 * size])  # a line longer than the window
        last.feed(piece)
        for copy, _ in copies:
            copy.feed(piece)
        stream += piece
        if rng.random() < 0.2:
            assert last.value == _whole_lines(stream, size)
            copies.append((LastLines(size, last.value), len(stream)))
    assert last.value == _whole_lines(stream, size)
    for copy, at in copies:
        assert copy.value == last.value, f"a copy made at {at} of {len(stream)}"


def test_a_line_cut_by_the_window_is_left_out() -> None:
    last = LastLines(16)
    last.feed(b"#new-token: 307, #cached-token: 0\nnext line\n")
    assert last.value == b"next line\n"
    last.feed(b"x" * 40)  # no line begins within the window: its last bytes
    assert last.value == b"x" * 16
