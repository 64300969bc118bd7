"""Shared fixtures: the anyio backend and a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import os
import random
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from pathlib import Path
from typing import NoReturn

import anyio
import pytest
from anyio.abc import Process

# tests/ is not a package: make the sshd helper importable for the fixtures and the tests.
sys.path.insert(0, str(Path(__file__).parent))

from http_receiver import Receiver, running_receiver
from sshd_server import SSHDServer, SSHDUnavailable, start_sshd, stop_sshd

from watchdog.follow.sources.sshpool import SSHOptions


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh needs the asyncio backend."""
    return "asyncio"


@pytest.fixture
async def sleeper(anyio_backend: str) -> AsyncIterator[tuple[Process, str]]:
    """A `sleep` process with a unique command line, and that command line."""
    duration = f"1000.{random.randrange(10**8):08d}"
    async with await anyio.open_process(["sleep", duration]) as process:
        try:
            yield process, f"sleep {duration}"
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP receiver on loopback (tests/http_receiver.py) for one test."""
    async with running_receiver() as state:
        yield state


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A command run in-process (`watch`, `demo`) sets up logging for its process: each test starts with the
    logging every other test has (structlog's configuration, the root logger's handlers and level)."""
    import logging  # noqa: PLC0415

    import structlog  # noqa: PLC0415

    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)


def unavailable(reason: str, require: str = "WATCHDOG_REQUIRE_SSHD") -> NoReturn:
    """Skip for `reason`; fail instead when the environment variable `require` is 1 (CI sets it)."""
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {reason}")
    pytest.skip(reason)


def require_binary(name: str, package: str, require: str) -> str:
    """The path of the program `name` (from Debian's `package`), or `unavailable` without it."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (Debian package `{package}`)", require)
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """A throwaway sshd on 127.0.0.1 with generated host and user keys, for the whole session."""
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SSHDUnavailable as exc:
        unavailable(str(exc))
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


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A loopback port whose SYNs go unanswered, as a black-holed host's: it listens with backlog 0 and its
    accept queue is full (the kernel then drops new SYNs)."""
    import socket  # noqa: PLC0415

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    probe = socket.socket()
    probe.settimeout(0.5)
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        pass  # dropped: a black hole
    else:
        pytest.skip("the kernel answered a SYN to a full accept queue (tcp_abort_on_overflow?)")
    finally:
        probe.close()
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
