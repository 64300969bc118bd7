"""A host whose sshd refuses watchdog's reader (a forced command older than this watchdog) says so."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from conftest import unavailable as _unavailable
from sshd_server import SSHDServer, SSHDUnavailable, start_sshd, stop_sshd

from watchdog.exceptions import TargetError
from watchdog.follow.sources import SSHOptions, SSHPool, SSHSource

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]
REFUSE = "ForceCommand /bin/sh -c 'echo \"llm-launch-watchdog-forced-command: refused: unknown shape\" >&2; exit 126'"


@pytest.fixture(scope="module")
def refusing_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """An sshd that answers every command with a refusal and exit status 126."""
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd-refusing"), extra_config=[REFUSE])
    except SSHDUnavailable as exc:
        _unavailable(str(exc))
        raise
    try:
        yield server
    finally:
        stop_sshd(server)


async def _read_all(source: SSHSource) -> None:
    async with source.open_follow() as items:
        async for _ in items:
            pass


@pytest.mark.parametrize("stream", [True, False])
async def test_a_refused_reader_is_an_error_naming_the_refusal(
    refusing_sshd: SSHDServer, tmp_path: Path, stream: bool
) -> None:
    """Streaming or polling, the refusal is a TargetError with the host's message, not an endless wait."""
    server = refusing_sshd
    log = tmp_path / "server.log"
    log.write_bytes(b"INFO starting\n")
    options = SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )
    async with SSHPool(options) as pool:
        source = SSHSource(pool, server.host, str(log), port=server.port, user=server.user, stream=stream)
        with anyio.fail_after(30), pytest.raises(TargetError) as caught:
            await _read_all(source)
    assert (
        "refused the log reader (exit 126): llm-launch-watchdog-forced-command: refused: unknown shape"
        in str(caught.value)
    )


async def test_a_reader_that_ends_at_once_is_backed_off_and_said_once(tmp_path: Path) -> None:
    """A host whose every session ends at once with no output (the reader cannot run there): the reader is
    started again after pauses that grow (not 4 times a second for ever), and the source says it once, as a
    `Disconnected` naming the reader, at its third failure in a row."""

    from watchdog.follow.sources import Disconnected  # noqa: PLC0415

    starts = tmp_path / "starts"
    force = f"ForceCommand /bin/sh -c 'date +%s.%N >> {starts}; echo cannot run here >&2'"
    try:
        server = start_sshd(tmp_path / "sshd", extra_config=[force])
    except SSHDUnavailable as exc:
        _unavailable(str(exc))
        raise
    said: list[Disconnected] = []
    try:
        options = SSHOptions(
            known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
        )
        async with SSHPool(options) as pool:
            source = SSHSource(
                pool, server.host, str(tmp_path / "server.log"), port=server.port, user=server.user
            )

            async def consume() -> None:
                async with source.open_follow() as items:
                    async for item in items:
                        if isinstance(item, Disconnected):
                            said.append(item)  # noqa: PERF401 - as it comes (the loop is cancelled)

            with anyio.fail_after(45):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(consume)
                    # the reader's starts, as the host's forced command counts them (no event to wait on)
                    while not starts.exists() or len(starts.read_text().split()) < 7:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
    finally:
        stop_sshd(server)
    times = [float(t) for t in starts.read_text().split()]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(said) == 1, said
    assert "the log reader on" in said[0].reason
    assert "cannot run here" in said[0].reason
    assert gaps[-1] >= 1.6, gaps  # the 6th failure in a row waits 3.2 s, jittered to half at least
    assert gaps[-1] > gaps[1], gaps


async def test_a_follower_that_fails_again_and_again_is_backed_off_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose reader answers garbage (not the reader's protocol): the daemon starts the launch's follower
    again after pauses that double, and logs the failure once for the streak, not at every try."""
    from structlog.testing import capture_logs  # noqa: PLC0415

    from watchdog.daemon import supervisor  # noqa: PLC0415
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415

    monkeypatch.setattr(supervisor, "RESTART_PAUSE", 0.05)  # the first pause; each next one doubles
    starts = tmp_path / "starts"
    force = f"ForceCommand /bin/sh -c 'date +%s.%N >> {starts}; echo not-the-reader-protocol'"
    try:
        server = start_sshd(tmp_path / "sshd", extra_config=[force])
    except SSHDUnavailable as exc:
        _unavailable(str(exc))
        raise
    try:
        options = SSHOptions(
            known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
        )
        target = parse_target(f"ssh://{server.user}@{server.host}:{server.port}{tmp_path / 'server.log'}")
        plan = LaunchPlan(LaunchSpec(name="garbled", target=target), host="gpu1", ssh=options)
        daemon = Daemon({"garbled": plan}, handle_signals=False)
        with capture_logs() as logs, anyio.fail_after(45):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                while not starts.exists() or len(starts.read_text().split()) < 6:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    finally:
        stop_sshd(server)
    gaps = [b - a for a, b in itertools.pairwise(float(t) for t in starts.read_text().split())]
    assert gaps[-1] >= 0.4, gaps  # 0.05, 0.1, 0.2, 0.4, 0.8 s: the fifth pause is 0.8 s
    failed = [e for e in logs if e["event"] == "launch follower failed"]
    assert len(failed) == 1, failed
    assert "not-the-reader-protocol" in failed[0]["error"]
