"""Latency from a line appended to a file on an SSH host to the moment the follower yields it.

Starts a throwaway sshd on 127.0.0.1 (as the tests do), appends timestamped lines at irregular
intervals, follows the file with SSHSource and prints p50/p99 of append-to-yield latency.

    /tmp/venv/bin/python benchmarks/ssh_latency.py [--lines 200] [--gap-ms 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sshd_server import SSHDServer, running_sshd

from watchdog.follow.sources import Chunk, SSHOptions, SSHPool, SSHSource


async def measure(server: SSHDServer, log: Path, lines: int, gap: float) -> list[float]:
    """Append `lines` timestamped lines `gap` seconds apart (jittered); return their latencies in ms."""
    options = SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )
    latencies: list[float] = []
    # The warm-up line is read once the remote tail runs; only then does the writer start, so
    # connection and command start-up are not counted as line latency.
    await anyio.Path(log).write_bytes(b"warmup 0\n")
    async with SSHPool(options) as pool:
        source = SSHSource(pool, server.host, str(log), port=server.port, user=server.user)
        async with source.open_follow() as items, anyio.create_task_group() as tg:
            started = anyio.Event()

            async def writer() -> None:
                await started.wait()
                with log.open("ab", buffering=0) as file:
                    for i in range(lines):
                        await anyio.sleep(gap * random.uniform(0.5, 1.5))
                        file.write(b"%d %d\n" % (i, time.perf_counter_ns()))

            tg.start_soon(writer)
            partial = b""
            async for item in items:
                if not isinstance(item, Chunk):
                    continue
                now = time.perf_counter_ns()
                partial += item.data
                *complete, partial = partial.split(b"\n")
                latencies.extend((now - int(line.split()[1])) / 1e6 for line in complete if line[:1] != b"w")
                started.set()
                if len(latencies) >= lines:
                    break
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_sshd(Path(tmp) / "sshd") as server:
        latencies = anyio.run(measure, server, Path(tmp) / "bench.log", args.lines, args.gap_ms / 1000)
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"lines={len(latencies)} p50={p50:.1f} ms p99={p99:.1f} ms max={latencies[-1]:.1f} ms")
    verdict = "met" if p50 <= 20 and p99 <= 50 else "MISSED"
    print(f"goal p50 <= 20 ms and p99 <= 50 ms: {verdict}")


if __name__ == "__main__":
    main()
