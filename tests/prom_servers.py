"""Real Prometheus and Alertmanager processes for the tests: started on a free loopback port, stopped after."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import anyio
import pytest
from anyio.abc import Process
from http_client import Client

POLL = 0.1  # seconds between two questions to an HTTP API
PORT_ATTEMPTS = 3  # a free port can be taken by someone else before the binary binds it
STOP_TIMEOUT = 10.0  # seconds a process gets to shut down on SIGTERM before it is killed
READY_DEADLINE = 45.0  # seconds a binary may take to answer /-/ready (a loaded CI machine is slow)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def stop(process: Process) -> None:
    """SIGTERM (Prometheus flushes and exits), then SIGKILL if it does not go in time."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(STOP_TIMEOUT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        await process.aclose()


@asynccontextmanager
async def open_binary(argv: list[str], tmp: Path, name: str) -> AsyncIterator[Client]:
    """A Prometheus or Alertmanager (`argv`, plus a free loopback --web.listen-address; `{attempt}` in an
    argument is the attempt's number): an HTTP client for its API, once it answers /-/ready."""
    log_path = tmp / f"{name}.out"
    output = ""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = free_port()
        with log_path.open("wb") as log:
            process = await anyio.open_process(
                [
                    *[a.replace("{attempt}", str(attempt)) for a in argv],
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            async with Client(f"http://127.0.0.1:{port}", timeout=2.0) as client:
                with anyio.fail_after(READY_DEADLINE):
                    while process.returncode is None:
                        try:
                            if (await client.get("/-/ready")).status_code == 200:
                                break
                        except aiohttp.ClientError:
                            pass  # not listening yet
                        await anyio.sleep(POLL)
                if process.returncode is None:
                    yield client
                    return
        finally:
            await stop(process)
        output = log_path.read_text(errors="replace")
        if "address already in use" not in output:
            break
    pytest.fail(f"{name} exited with {process.returncode}:\n{output[-2000:]}")
