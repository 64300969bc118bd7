"""What the SSH source itself costs the daemon's process per followed log: CPU per packet, memory per log.

In one process, as the daemon has them: one `SSHPool` per host name (all pointing at one throwaway OpenSSH sshd
on 127.0.0.1, started as the tests start it), one `SSHSource.open_follow` per log, each iterated by a task of
its own that only counts the bytes (no analysis: what is measured is asyncssh's packet handling, the channel's
queue, the source's generator and the task switch per chunk). A writer process grows every log as
`daemon_bench.py` does (a 100 ms tick: usually 0 or 1 line, one tick in 20 a burst; about 10 lines/s).

CPU is this process's utime + stime over the window (the remote side, sshd and the writer are other
processes); per chunk is that over the chunks delivered (one SSH data packet each, unless several of a log's came
in one read of the connection: those are one chunk), per KiB over the bytes. Memory is VmRSS after every
log was read to its end, less before the first was opened, over the logs (connections included).

`--coalesce K` estimates the best case of one SSH channel per host for many logs (issue 31): K logs' writes of
a tick are appended to one file in one write, so one packet carries what K packets carry without it, and
each chunk read is cut in K parts handed to K tasks (through a deque and a future, as `CommandOutput` hands a
packet to its reader): the packets fall K-fold, the per-log hand-over stays. Real hosts only coalesce what their
logs write within one poll of the remote reader (10 ms); here every log writes on the same tick.

`--push` hands each live read to a callback in asyncssh's pass over what the connection received (`Pushes`), as
the daemon's followers take them, instead of through each log's task.

`--analyze` feeds each log's chunks to an analyzer of its own, as the daemon's follower does (the CPU is then
the source's and the analyzer's).

`--stall S` keeps the event loop busy (blocked, not counted as CPU) S seconds of every second, as a daemon behind
its logs is: each connection's packets pile up in its socket and come in large reads (with `--hosts 2`, a
hundred logs a connection, as 2,000 launches on 20 hosts have).

    python benchmarks/ssh_source_bench.py [--launches 200] [--hosts 20] [--seconds 15] [--coalesce 1] [--push]
                                          [--analyze] [--stall 0] [--multiplex [--coalesce-ms MS]]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_bench import _ssh_user  # type: ignore[import-not-found,unused-ignore]
from sshd_server import SSHDServer, running_sshd  # type: ignore[import-not-found,unused-ignore]

from watchdog.core.analyzer import Analyzer
from watchdog.follow.sources import CaughtUp, Chunk, SourceItem, SSHOptions, SSHPool, SSHSource, mux
from watchdog.profiles.loader import catalogue

LINE = b"[2026-12-05 09:00:00 TP0] Decode batch. #running-req: 12, #token: 4567, token usage: 0.05, gen throughput (token/s): 512.3\n"
TICK = 0.1
SETTLE = 1.0  # s after the writer starts before the window opens

# The writer: per tick and per log, 1 line with probability 0.42, a burst of 8 to 16 one tick in 20; the logs
# of one file (`--coalesce`) written in one write.
WRITER = r"""
import random, sys, time
seconds, per_file, line = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
files = [open(path, "ab", buffering=0) for path in sys.argv[4:]]
rng = random.Random(1)
end = time.monotonic() + seconds
tick = time.monotonic()
while tick < end:
    for file in files:
        lines = 0
        for _ in range(per_file):
            roll = rng.random()
            lines += rng.randint(8, 16) if roll < 0.05 else 1 if roll < 0.47 else 0
        if lines:
            file.write(line * lines)
    tick += 0.1
    time.sleep(max(tick - time.monotonic(), 0.0))
"""


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0])


class _Part:
    """A sub-log's queue: what one log's follower would get from a channel shared by several logs."""

    def __init__(self) -> None:
        self.items: deque[Chunk] = deque()
        self.waiter: asyncio.Future[None] | None = None

    def put(self, chunk: Chunk) -> None:
        self.items.append(chunk)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def receive(self) -> Chunk:
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
            self.waiter = None
        return self.items.popleft()


async def _stall(seconds: float) -> None:
    """Block the event loop `seconds` of every second (`--stall`)."""
    while True:
        await anyio.sleep(1.0 - seconds)
        time.sleep(seconds)  # noqa: ASYNC251 - the event loop kept busy, on purpose


async def measure(server: SSHDServer, logs_dir: Path, args: argparse.Namespace) -> dict[str, float]:
    files = args.launches // args.coalesce
    paths = []
    for i in range(files):
        path = logs_dir / f"f{i:04d}.log"
        path.write_bytes(LINE * 50)
        paths.append(path)
    options = SSHOptions(
        known_hosts=str(server.known_hosts),
        identity=str(server.client_key),
        config=None,
        use_agent=False,
        multiplex=args.multiplex,
    )
    pools = [SSHPool(options) for _ in range(args.hosts)]
    counts = {"bytes": 0, "chunks": 0, "parts": 0}
    profiles = catalogue() if args.analyze else None
    caught = anyio.Event()
    pending = files

    async def part(queue: _Part) -> None:
        while True:
            chunk = await queue.receive()
            counts["parts"] += len(chunk.data)

    async def follow(source: SSHSource, tg: anyio.abc.TaskGroup) -> None:
        parts = [_Part() for _ in range(args.coalesce)] if args.coalesce > 1 else []
        for queue in parts:
            tg.start_soon(part, queue)
        first = [True]

        def take(item: SourceItem) -> None:
            nonlocal pending
            if isinstance(item, Chunk):
                counts["bytes"] += len(item.data)
                counts["chunks"] += 1
                if parts:
                    size = -(-len(item.data) // len(parts))
                    for k, queue in enumerate(parts):
                        piece = item.data[k * size : (k + 1) * size]
                        queue.put(Chunk(item.offset + k * size, piece, item.file))
                done = item.caught_up
            else:
                done = isinstance(item, CaughtUp)
            if first[0] and done:
                first[0] = False
                pending -= 1
                if not pending:
                    caught.set()

        analyzer = Analyzer(profiles) if profiles is not None else None

        def take_fed(item: SourceItem) -> None:
            if analyzer is not None and isinstance(item, Chunk):
                analyzer.feed(item.data, time.monotonic())
            take(item)

        async with source.open_follow() as items:
            items.merge = True  # type: ignore[attr-defined]  # as the follower sets it
            if args.push:
                items.push = take_fed  # type: ignore[attr-defined]  # `Pushes`, as the follower sets it
            async for item in items:
                take_fed(item)

    gc.collect()
    before = _rss_kb()
    async with anyio.create_task_group() as tg:
        for pool in pools:
            await pool.__aenter__()
        for i, path in enumerate(paths):
            source = SSHSource(
                pools[i % args.hosts], server.host, str(path), port=server.port, user=server.user
            )
            tg.start_soon(follow, source, tg)
        with anyio.fail_after(180):
            await caught.wait()
        await anyio.sleep(1.0)
        gc.collect()
        opened = _rss_kb()
        writer = await anyio.open_process(
            [sys.executable, "-c", WRITER, str(args.seconds + SETTLE + 1), str(args.coalesce), LINE.decode()]
            + [str(path) for path in paths],
            stdin=None,
            stdout=None,
            stderr=None,
        )
        try:
            if args.stall:
                tg.start_soon(_stall, args.stall)
            await anyio.sleep(SETTLE)
            usage0, chunks0, bytes0, packets0, t0 = (
                resource.getrusage(resource.RUSAGE_SELF),
                counts["chunks"],
                counts["bytes"],
                _received_packets(pools, server),
                time.monotonic(),
            )
            await anyio.sleep(args.seconds)
            usage1, chunks1, bytes1, packets1, t1 = (
                resource.getrusage(resource.RUSAGE_SELF),
                counts["chunks"],
                counts["bytes"],
                _received_packets(pools, server),
                time.monotonic(),
            )
        finally:
            await writer.wait()
        tg.cancel_scope.cancel()
    for pool in pools:
        await pool.__aexit__(None, None, None)
    cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    wall = t1 - t0
    chunks = chunks1 - chunks0
    return {
        "cpu": 100 * cpu / wall,
        "packets": chunks / wall,
        "us_per_packet": 1e6 * cpu / max(chunks, 1),
        "bytes": (bytes1 - bytes0) / wall,
        "us_per_kib": 1e6 * cpu / max((bytes1 - bytes0) / 1024, 1),
        "ssh_packets": (packets1 - packets0) / wall,
        "us_per_line": 1e6 * cpu / max((bytes1 - bytes0) / len(LINE), 1),
        "rss_per_log": (opened - before) / args.launches,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _received_packets(pools: list[SSHPool], server: Any) -> int:
    """The SSH packets the pools' open connections have received (asyncssh's receive sequence number; 0 where a
    version of asyncssh has none)."""
    conns = [
        conn for pool in pools for conn in pool.connections(server.host, port=server.port, user=server.user)
    ]
    return sum(getattr(conn, "_recv_seq", 0) for conn in conns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=20, help="host names, one SSHPool each")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--coalesce", type=int, default=1, help="logs per SSH packet (see the docstring)")
    parser.add_argument("--ssh-user", help="as daemon_bench.py's --ssh-user")
    parser.add_argument(
        "--push",
        action="store_true",
        help="each live read handed to a callback in asyncssh's pass over the connection (`Pushes`), as the daemon "
        "has it, not through each log's task",
    )
    parser.add_argument(
        "--multiplex",
        action="store_true",
        help="each host's logs through its one multiplexer channel (`SSHOptions.multiplex`, ssh_multiplex)",
    )
    parser.add_argument(
        "--coalesce-ms",
        type=int,
        help="with --multiplex: the multiplexer's wait for other logs' bytes (default: mux.COALESCE_MS)",
    )
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="each log's chunks fed to an analyzer, as the daemon's follower does",
    )
    parser.add_argument(
        "--stall",
        type=float,
        default=0.0,
        help="seconds of every second the event loop is kept busy (0-0.95)",
    )
    args = parser.parse_args()
    if not 0 <= args.stall <= 0.95:
        parser.error("--stall must be between 0 and 0.95")
    if args.launches % args.coalesce:
        parser.error("--launches must be a multiple of --coalesce")
    if args.coalesce_ms is not None:
        mux.COALESCE_MS = args.coalesce_ms
    user = _ssh_user(args.ssh_user)
    with tempfile.TemporaryDirectory(prefix="wd-ssh-source-bench-") as tmp:
        Path(tmp).chmod(0o755)
        with running_sshd(Path(tmp) / "sshd") as server:
            server.user = user
            logs_dir = Path(tmp) / "logs"
            logs_dir.mkdir()
            result = anyio.run(measure, server, logs_dir, args)
    load = os.getloadavg()
    print(
        f"{args.launches} logs, {args.hosts} host names, {args.coalesce} log(s) a packet, stall {args.stall:g} s"
        f"{', pushed' if args.push else ''}{', analyzed' if args.analyze else ''}: "
        f"CPU {result['cpu']:.2f} % of a core, {result['packets']:.0f} chunks/s "
        f"({result['bytes'] / 1024:.0f} KiB/s), {result['us_per_packet']:.1f} us a chunk, "
        f"{result['us_per_kib']:.1f} us a KiB, {result['us_per_line']:.1f} us a line; "
        f"{result['ssh_packets']:.0f} SSH packets/s received; "
        f"RSS {result['rss_per_log']:.1f} KiB a log; peak RSS {result['peak']:.1f} MB; "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )


if __name__ == "__main__":
    main()
