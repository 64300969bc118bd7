"""Resume a big log from its checkpoint vs. read it from the start: time to catch up and bytes read.

    python benchmarks/gen_verbose_log.py --size-gb 0.2 --out /tmp/big.log
    /tmp/venv/bin/python benchmarks/resume_bench.py /tmp/big.log [--ssh]

With --ssh the log is followed over a throwaway sshd on 127.0.0.1 (as the tests start it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchdog.follow.follower import LaunchFollower, LaunchSpec
from watchdog.follow.sources import Chunk, parse_target
from watchdog.follow.sources.local import LocalSource
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.store import open_store

APPEND = b"[2025-07-02 08:00:00 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.01\n" * 500


class Counting:
    def __init__(self, inner: Any) -> None:
        self.inner, self.bytes = inner, 0

    def open_follow(self, offset: int = 0, cursor: str | None = None) -> Any:
        return self._open(offset, cursor)

    @asynccontextmanager
    async def _open(self, offset: int, cursor: str | None) -> Any:
        async with self.inner.open_follow(offset, cursor) as items:
            yield self._count(items)

    async def _count(self, items: Any) -> Any:
        async for item in items:
            if isinstance(item, Chunk):
                self.bytes += len(item.data)
            yield item

    async def identify(self, offset: int) -> Any:
        return await self.inner.identify(offset)


async def follow(spec: LaunchSpec, source: Counting, store: Any) -> tuple[float, int, int | None]:
    follower = LaunchFollower(spec, source=source, checkpoints=store)

    async def drain() -> None:
        with follower.updates:
            async for _ in follower.updates:
                pass

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await tg.start(follower.run)
        took = time.perf_counter() - t0
        tg.cancel_scope.cancel()
    return took, source.bytes, follower.resumed_at


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("--ssh", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="resume-bench-"))
    log = work / "server.log"
    log.write_bytes(args.log.read_bytes())
    pool = None
    if args.ssh:
        from sshd_server import start_sshd, stop_sshd  # noqa: PLC0415

        server = start_sshd(work / "sshd")
        pool = SSHPool(
            SSHOptions(
                known_hosts=str(server.known_hosts),
                identity=str(server.client_key),
                config=None,
                use_agent=False,
            )
        )
        make = lambda: Counting(SSHSource(pool, server.host, str(log), port=server.port, user=server.user))  # noqa: E731
        target = f"ssh://{server.user}@{server.host}:{server.port}{log}"
    else:
        make = lambda: Counting(LocalSource(log))  # noqa: E731
        target = str(log)
    spec = LaunchSpec(name="big", target=parse_target(target))
    try:
        async with open_store(work / "state") as store:
            took, read, at = await follow(spec, make(), store)
            print(f"from the start:      {took:7.3f} s  {read:>11,} bytes read (no checkpoint)")
            blob = await store.load_checkpoint("big")
            print(f"checkpoint saved:    {len(blob or b''):,} bytes")
            with log.open("ab") as f:
                f.write(APPEND)
            took, read, at = await follow(spec, make(), store)
            print(
                f"from the checkpoint: {took:7.3f} s  {read:>11,} bytes read (resumed at {at:,}; {len(APPEND):,} appended)"
            )
    finally:
        if pool is not None:
            await pool.aclose()
            stop_sshd(server)


anyio.run(main)
