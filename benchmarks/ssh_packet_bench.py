"""What one SSH data packet costs the daemon's process to receive: asyncssh's path from the socket to a session.

One `SSHPool` connection (as the daemon makes it: its reads in slices, its lazy keepalive, and whatever else the
tree's `_Client` does to a connection) to a throwaway OpenSSH sshd on 127.0.0.1 (started as the tests start it);
one session channel (as `CommandOutput` sets its channel up) runs `python3 -c PROGRAM` on it, which writes
`--packets` writes of `--size` bytes, one every `--gap` seconds (so that sshd sends each as a packet of its own,
as a host's multiplexer's write rounds come). The session only counts the bytes. Measured: the thread CPU of
the event loop's thread while they come, over the packets received (asyncssh's receive sequence number), in all
(the event loop's turn and the socket's read included) and in the connection's `data_received` alone (asyncssh's
parse, decryption and dispatch to the session: what a packet costs beyond its read), in `--rounds` rounds (each
a new channel); the median round is printed. Run it from each tree to compare them.

    python benchmarks/ssh_packet_bench.py [--packets 5000] [--size 1000] [--gap 0.0005] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from daemon_bench import _ssh_user  # type: ignore[import-not-found,unused-ignore]
from sshd_server import SSHDServer, running_sshd  # type: ignore[import-not-found,unused-ignore]

from watchdog.follow.sources import SSHOptions, SSHPool, channel
from watchdog.follow.sources.asyncssh_quiet import asyncssh

PROGRAM = """\
import os, sys, time
n, size, gap = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
data = b"x" * (size - 1) + b"\\n"
for _ in range(n):
    os.write(1, data)
    time.sleep(gap)
"""


class _Sink(asyncssh.SSHClientSession[bytes]):
    """Counts what comes; its channel set up as `CommandOutput` sets up its own."""

    def __init__(self) -> None:
        self.bytes = 0
        self.done = anyio.Event()

    def connection_made(self, chan: Any) -> None:
        channel.CommandOutput.connection_made(self, chan)  # type: ignore[arg-type]

    def data_received(self, data: bytes, datatype: Any) -> None:
        self.bytes += len(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set()


async def _round(
    pool: SSHPool, server: SSHDServer, args: argparse.Namespace
) -> tuple[float, float, int, int]:
    conn = await pool.connect(server.host, port=server.port, user=server.user)
    command = shlex.join(["python3", "-c", PROGRAM, str(args.packets), str(args.size), str(args.gap)])
    seq0 = getattr(conn, "_recv_seq", 0)
    inner = [0]
    receive = conn.data_received

    def timed(data: bytes, datatype: Any = None) -> None:
        t0 = time.thread_time_ns()
        try:
            receive(data, datatype)
        finally:
            inner[0] += time.thread_time_ns() - t0

    conn.data_received = timed  # type: ignore[method-assign]
    cpu0 = time.thread_time()
    try:
        _chan, session = await conn.create_session(_Sink, command, encoding=None)
        sink = cast("_Sink", session)
        await sink.done.wait()
    finally:
        conn.data_received = receive  # type: ignore[method-assign]
    cpu = time.thread_time() - cpu0
    return cpu, inner[0] / 1e9, getattr(conn, "_recv_seq", 0) - seq0, sink.bytes


async def _measure(server: SSHDServer, args: argparse.Namespace) -> None:
    options = SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )
    async with SSHPool(options) as pool:
        rows = [await _round(pool, server, args) for _ in range(args.rounds)]
    per = sorted(1e6 * cpu / max(packets, 1) for cpu, _, packets, _ in rows)
    parsed = sorted(1e6 * inner / max(packets, 1) for _, inner, packets, _ in rows)
    _, _, packets, got = rows[0]
    print(
        f"{args.packets} writes of {args.size} B a round, {args.rounds} rounds: {packets} packets received in the "
        f"first ({got} B); CPU a packet: median {statistics.median(per):.1f} us in all (rounds "
        f"{', '.join(f'{p:.1f}' for p in per)}), {statistics.median(parsed):.2f} us in the connection's "
        f"data_received (rounds {', '.join(f'{p:.2f}' for p in parsed)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=5000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--gap", type=float, default=0.0005)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ssh-user", help="as daemon_bench.py's --ssh-user")
    args = parser.parse_args()
    user = _ssh_user(args.ssh_user)
    with tempfile.TemporaryDirectory(prefix="wd-ssh-packet-bench-") as tmp:
        Path(tmp).chmod(0o755)
        with running_sshd(Path(tmp) / "sshd") as server:
            server.user = user
            anyio.run(_measure, server, args)


if __name__ == "__main__":
    main()
