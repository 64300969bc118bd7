"""How `watchdog replay` reads a file: chunks of whole lines, whatever the lines' lengths and the file's end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.follow import replay


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from([b"\n", b"a", b"bb\n", b"c" * 15, b"d" * 40 + b"\n", b"e" * 100, b"f" * 7 + b"\n"]),
        max_size=60,
    )
)
def test_chunks_are_the_file_cut_after_their_last_newline(
    pieces: list[bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The chunks are the file's bytes in order; each is what a read of CHUNK bytes there holds, cut after its
    last newline (the newline looked for in its last bytes first, or in the whole read where they hold none, or
    where the file ends within it)."""
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("reads") / "log"
    path.write_bytes(data)
    chunk, probe = 64, 16
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replay, "CHUNK", chunk)
        mp.setattr(replay, "_PROBE", probe)
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = list(replay._whole_lines(fd))
        finally:
            os.close(fd)
    assert b"".join(chunks) == data
    offset = 0
    for got in chunks:
        window = data[offset : offset + chunk]
        end = window.rfind(b"\n") + 1
        assert got == (window[:end] if end else window)
        offset += len(got)


def test_a_chunk_read_whole_lines_only(tmp_path: Path) -> None:
    """A log of lines read in megabyte chunks: each ends at a newline, and they hold the whole log."""
    data = b"".join(b"line %d of the log %s\n" % (n, b"x" * (n % 300)) for n in range(40_000))
    path = tmp_path / "log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = list(replay._whole_lines(fd))
    finally:
        os.close(fd)
    assert len(chunks) > 3
    assert all(c.endswith(b"\n") and len(c) <= replay.CHUNK for c in chunks)
    assert b"".join(chunks) == data
