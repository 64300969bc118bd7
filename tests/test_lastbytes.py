"""`LastBytes`: the last N bytes of a stream, whatever the pieces it came in."""

from __future__ import annotations

import random

import pytest

from watchdog.core.lastbytes import LastBytes


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
