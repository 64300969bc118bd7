"""Tests for the files an SSH connection attempt reads (known_hosts, the SSH config, the identity): in worker
threads, at most two at once in the event loop (over every pool: a daemon keeps one per host name), against the
test sshd."""

from __future__ import annotations

import threading
from contextlib import AsyncExitStack

import anyio
import pytest
from sshd_server import SSHDServer

from watchdog.follow.sources.hostkeys import HostKeyCheck
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

POOLS = 3  # a daemon's pools: one per host name
BURST = 2  # connection attempts at once in each, as a full host's extra connections come (one per host)


async def test_a_burst_of_connections_reads_its_files_two_at_a_time(
    sshd: SSHDServer, ssh_options: SSHOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each read of known_hosts waits until a second one runs beside it (or 10 s): what runs at once, and in which
    # threads, is what the pool allows, not how fast a read ends
    lock = threading.Lock()
    inside, most = [0], [0]
    pair = threading.Event()
    threads: set[int] = set()
    load = HostKeyCheck.load

    def counted(check: HostKeyCheck) -> None:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            threads.add(threading.get_ident())
            if inside[0] >= 2:
                pair.set()
        pair.wait(10)
        try:
            load(check)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(HostKeyCheck, "load", counted)
    async with AsyncExitStack() as stack:
        pools = [await stack.enter_async_context(SSHPool(ssh_options)) for _ in range(POOLS)]
        conns = []

        async def one(pool: SSHPool) -> None:
            conns.append(await pool._open("127.0.0.1", sshd.port, None))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for pool in pools:
                    for _ in range(BURST):
                        tg.start_soon(one, pool)
        try:
            # every attempt connected, with the host key known_hosts gave and the identity read for it
            assert len(conns) == POOLS * BURST
            for conn in conns:
                result = await conn.run("echo ok", check=True)
                assert result.stdout == "ok\n"
        finally:
            for conn in conns:
                conn.close()
    assert most[0] == 2
    assert len(threads) <= 2
