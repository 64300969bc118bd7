"""No log reader of ours stays on a host after a fault: a connection cut where sshd does not see it (a network
that drops it halfway), then the recovery, then the daemon's stop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream, TaskGroup
from sshd_server import SSHDServer, readers_of

from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import SSHOptions, parse_target

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

DEADLINE = 30.0
POLL = 0.05  # seconds between looks at the host's processes


@dataclass
class CuttingProxy:
    """A TCP relay to sshd that can cut its clients off while it keeps sshd's side of each connection open (as a
    network that drops the connection halfway does: sshd never learns that its client is gone)."""

    target: int
    port: int = 0
    clients: list[SocketStream] = field(default_factory=list)
    upstreams: list[SocketStream] = field(default_factory=list)

    async def cut(self) -> None:
        """Close every client's side; sshd's side stays open and unanswered."""
        clients, self.clients = self.clients, []
        for client in clients:
            await client.aclose()

    async def _relay(self, client: SocketStream, tg: TaskGroup) -> None:
        upstream = await anyio.connect_tcp("127.0.0.1", self.target)
        self.clients.append(client)
        self.upstreams.append(upstream)

        async def pump(src: SocketStream, dst: SocketStream) -> None:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for data in src:
                    await dst.send(data)

        tg.start_soon(pump, client, upstream)
        tg.start_soon(pump, upstream, client)


@asynccontextmanager
async def cutting_proxy(target: int) -> AsyncIterator[CuttingProxy]:
    """A `CuttingProxy` to 127.0.0.1:`target` on a free port, until the block ends."""
    proxy = CuttingProxy(target)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:

        async def serve(client: SocketStream) -> None:
            await proxy._relay(client, tg)

        tg.start_soon(listener.serve, serve)
        try:
            yield proxy
        finally:
            for stream in proxy.clients + proxy.upstreams:
                await stream.aclose()
            tg.cancel_scope.cancel()


def _reading_tails(path: Path) -> set[int]:
    # the reading tails (`tail ... -f /dev/fd/3`) of the remote readers of `path`
    found = set()
    for pid in readers_of(str(path)):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"tail") and b"-f" in argv and b"/dev/fd/3" in argv:
            found.add(pid)
    return found


async def _until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(DEADLINE):
        while not check():  # noqa: ASYNC110 - polling the host's processes: no event says they ended
            await anyio.sleep(POLL)


async def test_no_reader_is_left_after_a_cut_connection_nor_after_the_daemon_stops(
    sshd: SSHDServer, tmp_path: Path
) -> None:
    """A connection cut where sshd does not see it: once the daemon follows again, one reading tail runs on the
    host (the one before is ended, not left beside it), and none once the daemon has stopped."""
    log = tmp_path / "cut.log"
    log.write_bytes(b"INFO starting the server\n")
    async with cutting_proxy(sshd.port) as proxy:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.host_key_line.replace(f"]:{sshd.port} ", f"]:{proxy.port} ") + "\n")
        options = SSHOptions(
            known_hosts=str(known), identity=str(sshd.client_key), config=None, use_agent=False
        )
        target = parse_target(f"ssh://{sshd.user}@127.0.0.1:{proxy.port}{log}")
        plan = LaunchPlan(LaunchSpec(name="cut", target=target), host="gpu1", ssh=options)
        daemon = Daemon({"cut": plan}, handle_signals=False)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                await _until(lambda: len(_reading_tails(log)) == 1)
                before = _reading_tails(log)
                await proxy.cut()
                # followed again: a new reader, and the one before gone (its sshd session still open)
                await _until(lambda: len(_reading_tails(log)) == 1 and not _reading_tails(log) & before)
                tg.cancel_scope.cancel()
        await _until(lambda: not _reading_tails(log))
