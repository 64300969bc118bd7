"""A host whose sshd refuses watchdog's reader (a forced command older than this watchdog) says so."""

from __future__ import annotations

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
