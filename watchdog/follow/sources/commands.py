"""A command's output as it comes, run on this machine or on a host over the shared SSH connection.

The container and journald sources read their platform through its own CLI (`docker logs`, `journalctl`), here
or on a GPU host: one `Runner` for each place, the same `Output` from both.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc

from watchdog.exceptions import ConnectionLost, TargetError

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool

__all__ = ["LocalRunner", "Output", "Runner", "SSHRunner", "run"]

_ERRORS = 4096  # bytes of a command's stderr kept to say why it failed
# seconds a command whose stdin is its lifeline (its script ends what it started when stdin closes) is given
# to end on its own before it is killed
_LIFELINE_WAIT = 2.0


class Output(Protocol):
    """A running command's stdout, and how it ended."""

    async def receive(self) -> bytes | None:
        """The next bytes of stdout; None at its end.

        Raises:
            ConnectionLost: the SSH connection that carried it broke.
        """
        ...

    def ended(self) -> tuple[int | None, str]:
        """After stdout's end: the exit status (None: unknown) and the end of what it said on stderr."""
        ...


class Runner(Protocol):
    """Where commands run: `where` names it for people."""

    where: str

    def open(self, argv: list[str]) -> AbstractAsyncContextManager[Output]:
        """Start the command `argv`; it is stopped when the block is left."""
        ...


async def run(runner: Runner, argv: list[str]) -> tuple[bytes, int | None, str]:
    """Run the command `argv` to its end: its stdout, exit status and stderr."""
    out = b""
    async with runner.open(argv) as output:
        while (data := await output.receive()) is not None:
            out += data
        status, errors = output.ended()
    return out, status, errors


class _LocalOutput:
    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process
        self._errors = b""
        self._status: int | None = None

    async def receive(self) -> bytes | None:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            assert self._process.stderr is not None
            try:
                while len(self._errors) < _ERRORS:
                    self._errors += await self._process.stderr.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                pass
            self._status = await self._process.wait()
            return None

    def ended(self) -> tuple[int | None, str]:
        return self._status, self._errors.decode(errors="replace")


class LocalRunner:
    """Commands on this machine. `lifeline`: a command's script ends what it started once its stdin closes
    (`docker logs` in the background): it is given that chance before it is killed."""

    def __init__(self, where: str = "this machine", *, lifeline: bool = False) -> None:
        self.where = where
        self._lifeline = lifeline

    @asynccontextmanager
    async def open(self, argv: list[str]) -> AsyncIterator[Output]:
        try:
            process = await anyio.open_process(argv)
        except FileNotFoundError as exc:
            raise TargetError(f"{argv[0]} is not installed on {self.where}: {exc}", reason=str(exc)) from exc
        try:
            yield _LocalOutput(process)
        finally:
            with anyio.CancelScope(shield=True):
                if self._lifeline and process.returncode is None:
                    assert process.stdin is not None
                    await process.stdin.aclose()
                    with anyio.move_on_after(_LIFELINE_WAIT):
                        await process.wait()
                if process.returncode is None:
                    process.terminate()
                await process.aclose()


class _SSHOutput:
    def __init__(self, host: str, session: object, conn: object) -> None:
        from watchdog.follow.sources.channel import CommandOutput  # noqa: PLC0415 - asyncssh for a host only

        assert isinstance(session, CommandOutput)
        self._host = host
        self._session = session
        self._conn = conn
        self._errors = b""

    async def receive(self) -> bytes | None:
        while True:
            kind, data, exc = await self._session.receive()
            if kind == "out":
                return data
            if kind == "err":
                self._errors = (self._errors + data)[-_ERRORS:]
                continue
            if exc is not None or self._conn.is_closed():  # type: ignore[attr-defined]  # an SSHClientConnection
                reason = str(exc or "closed")
                raise ConnectionLost(
                    f"connection to {self._host} lost: {reason}", host=self._host, reason=reason
                )
            return None

    def ended(self) -> tuple[int | None, str]:
        return self._session.exit_status, self._errors.decode(errors="replace")


class SSHRunner:
    """Commands on an SSH host, each a session channel of the shared pool (every argument quoted); closing it
    closes the command's stdin on the host."""

    def __init__(self, pool: SSHPool, host: str, port: int | None = None, user: str | None = None) -> None:
        self.pool = pool
        self._host = host
        self._port = port
        self._user = user
        self.where = host

    @asynccontextmanager
    async def open(self, argv: list[str]) -> AsyncIterator[Output]:
        from watchdog.follow.sources.channel import CommandOutput  # noqa: PLC0415 - asyncssh for a host only

        conn, session = await self.pool.open_session(
            self._host, CommandOutput, shlex.join(argv), port=self._port, user=self._user
        )
        try:
            yield _SSHOutput(self._host, session, conn)
        finally:
            session.close()
