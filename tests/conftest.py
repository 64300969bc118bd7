"""Shared fixtures: the anyio backend and a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# tests/ is not a package: make the sshd helper importable for the fixtures and the tests.
sys.path.insert(0, str(Path(__file__).parent))

from http_receiver import Receiver, running_receiver
from sshd_server import SSHDServer, SSHDUnavailable, start_sshd, stop_sshd

from watchdog.sources.sshpool import SSHOptions


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh needs the asyncio backend."""
    return "asyncio"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP receiver on loopback (tests/http_receiver.py) for one test."""
    async with running_receiver() as state:
        yield state


def _unavailable(reason: str) -> None:
    if os.environ.get("WATCHDOG_REQUIRE_SSHD") == "1":
        pytest.fail(f"WATCHDOG_REQUIRE_SSHD=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """A throwaway sshd on 127.0.0.1 with generated host and user keys, for the whole session."""
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SSHDUnavailable as exc:
        _unavailable(str(exc))
        raise  # unreachable: skip and fail raise
    try:
        yield server
    finally:
        stop_sshd(server)


@pytest.fixture
def ssh_options(sshd: SSHDServer) -> SSHOptions:
    """Options that reach the test sshd and nothing else (no agent, no ~/.ssh/config)."""
    return SSHOptions(
        known_hosts=str(sshd.known_hosts),
        identity=str(sshd.client_key),
        config=None,
        use_agent=False,
    )
