"""benchmarks/chunk_bench.py: daemon_bench's writes through the SSH source's per-packet path, the follower and the
analyzer, on a virtual clock; a log read a line a chunk is judged as the same log read a write a chunk."""

from __future__ import annotations

import asyncio

from benchscripts import load_script

chunk_bench = load_script("chunk_bench.py")


def _updates(one_line: bool) -> tuple[str, dict[str, int], int]:
    first, load = chunk_bench.writes(12, 25.0, 2)
    ticks = chunk_bench.plan(load, 3, one_line)
    _callback, _between, chunks, digest = asyncio.run(chunk_bench._round(first, ticks, 3, None))
    return digest, dict(chunk_bench.COUNTS), chunks


def test_every_crash_written_is_judged_through_the_per_packet_path() -> None:
    """Each crash the writer wrote is a `crashed` transition and a crashed verdict of its launch, each chunk one
    line, and each launch that started again was ready again: the chunks went through the real path."""
    _first, load = chunk_bench.writes(12, 25.0, 2)
    _startup, _serving, crash = chunk_bench.daemon_bench._corpus()
    written = sum(1 for _, _, data in load if data == crash)
    lines = sum(data.count(b"\n") for _, _, data in load)
    _digest, counts, chunks = _updates(one_line=True)
    assert chunks == lines
    assert written >= 12
    assert counts["t:crashed"] == written
    assert counts["c:crashed"] == written
    assert counts["c:ready"] >= 12  # the first content's verdict, and the relaunches'


def test_a_line_a_chunk_is_judged_as_a_write_a_chunk() -> None:
    """The same writes, read a line a chunk (the follower's one-line path: pushed, fed a line at a time) or a write
    a chunk: the same transitions (state, incarnation, line) and verdicts, launch by launch."""
    one_line, counts, chunks = _updates(one_line=True)
    whole, _, whole_chunks = _updates(one_line=False)
    assert chunks > whole_chunks
    assert counts["c:crashed"] > 0
    assert one_line == whole


def test_plan_puts_each_host_s_packets_of_a_tick_in_connection_reads() -> None:
    """A tick's writes, by connection read: a read holds at most one packet of each launch, of its host."""
    _first, load = chunk_bench.writes(6, 10.0, 1)
    ticks = chunk_bench.plan(load, 2, True)
    assert 90 <= len(ticks) <= 100  # up to the last tick written at
    pieces = 0
    for reads in ticks:
        for read in reads:
            assert len(read) == 2
            for host, packets in enumerate(read):
                launches = [i for i, _ in packets]
                assert len(set(launches)) == len(launches)
                assert all(i % 2 == host for i in launches)
                pieces += len(packets)
    assert pieces == sum(data.count(b"\n") for _, _, data in load)
