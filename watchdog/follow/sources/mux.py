"""One SSH channel per host for every log's reader: a small Python program on the host that runs the same reader
scripts (`watchdog.follow.sources.remote.READERS`) and frames their output into its one stdout.

Over SSH each followed log was its own channel, so each write of each log was its own SSH packet, and asyncssh's
per-packet path (decryption, parsing, dispatch, the channel's hand-over: about 25 us) was paid per line. The
multiplexer (`MUX_PROGRAM`, sent verbatim as `python3 -c PROGRAM watchdog-mux`: python3 >= 3.6, its standard
library only) takes on its stdin:

    o ID NAME HEXARG...   start the reader NAME (a key of READERS) with these arguments (each hex-encoded bytes),
                          each checked as the forced-command wrapper checks it (path, int, dec); it runs as
                          `/bin/sh -c BODY NAME ARG...` in a session of its own, its stdin a pipe: its lifeline
    c ID                  close that reader's stdin (it then ends, as a channel's reader does at the channel's EOF)
    p ID / r ID           stop / start again reading that reader's output (flow control: its pipe then fills and
                          its tail waits, as the SSH window makes it wait on its own channel)
    w MS                  from now on, once something is ready, wait MS milliseconds (at most 50) for what the
                          other readers write meanwhile before writing it all (`COALESCE_MS`)

and writes, after a first line `watchdog-mux 1`:

    ID o LEN\\n BYTES      what the reader wrote on its stdout
    ID e LEN\\n BYTES      ... on its stderr (its status lines)
    ID x STATUS\\n         it ended (both its pipes closed and it was reaped, looked for every 5 ms meanwhile): its
                          exit status (126: refused, as the wrapper refuses a command; the reason came before it on e)

writing what every reader has ready together (one select() round, one write): many logs' lines in one SSH packet.
So every per-log meaning (rotation, truncation, offsets, the P/W/E status lines, the lifeline) stays the reader
script's own. When its stdin ends (the channel closed, the connection lost) it closes every reader's lifeline and
exits: each reader ends as it would at the end of its own channel.

On the daemon's side `Multiplexer` is the channel's session, and each reader's output a `MuxOutput`: a
`CommandOutput` (its queue, `drive`, flow control) fed by the multiplexer's frames instead of its own channel, so
the source above it does not know the difference. `SSHPool.open_reader` chooses: the host's multiplexer where
`SSHOptions.multiplex` is on and it starts, else a channel of its own as before. A reader that ends by itself
(`watchdog-identify`: a file's identity, `SSHSource.identify`) is read to its exit status the same way: no channel
of its own to open and close.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from typing import Protocol

from watchdog.exceptions import ConnectionLost
from watchdog.follow.sources.asyncssh_quiet import asyncssh
from watchdog.follow.sources.channel import CommandOutput, unlogged_packets
from watchdog.follow.sources.packets import direct_data
from watchdog.follow.sources.remote import READERS

MUX_NAME = "watchdog-mux"
HELLO = b"watchdog-mux 1"
# ms the multiplexer waits, once a reader's bytes are ready, for the other readers' before it writes them all: the
# logs of a host are read by their tails at their own polls, 10 ms apart (`ssh.DEFAULT_TAIL_INTERVAL`) at each
# tail's own phase, so without a wait a write of several logs at once leaves the host in several packets; a wait of
# one poll lets every reader's next poll join the write (5 ms let about half of them: a third more packets, each
# costing the daemon asyncssh's receive path, the frames' parsing and a wake-up)
COALESCE_MS = 10
_ERRORS_KEPT = 2048  # the multiplexer's own stderr kept to say why it ended
_REFUSED = 126  # the exit status of a forced-command wrapper that refuses a command (deploy/ssh/)

# The program, with the readers' table put in (`repr`: the bodies verbatim). Kept to what python3.6 has; no single
# quote of its own beyond the table's, so that it reads well quoted in the wrapper.
_PROGRAM = """\
import os, selectors, subprocess, sys, time
READERS = @READERS@


def valid(kind, arg):
    if kind == "path":
        return arg != b"" and b"\\n" not in arg
    if kind == "int":
        return arg.isdigit()
    parts = arg.split(b".")
    return kind == "dec" and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit()


class Reader:
    def __init__(self, ident, proc):
        self.ident = ident
        self.proc = proc
        self.pipes = {proc.stdout.fileno(): (proc.stdout, b"o"), proc.stderr.fileno(): (proc.stderr, b"e")}
        self.paused = False


def start(words, out):
    ident = int(words[1])
    name = words[2].decode()
    if name not in READERS:
        return refuse(ident, "no reader named " + name, out)
    body, kinds = READERS[name]
    kinds = kinds.split()
    try:
        args = [bytes.fromhex(word.decode()) for word in words[3:]]
    except ValueError:
        return refuse(ident, name + ": an argument is not hex", out)
    if len(args) != len(kinds):
        return refuse(ident, name + ": takes %d argument(s), not %d" % (len(kinds), len(args)), out)
    for number, (kind, arg) in enumerate(zip(kinds, args), 1):
        if not valid(kind, arg):
            return refuse(ident, name + ": argument %d must be a %s" % (number, kind), out)
    try:
        proc = subprocess.Popen(
            [b"/bin/sh", b"-c", body.encode(), name.encode()] + args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        message = ("watchdog-mux: cannot start " + name + ": " + str(exc) + "\\n").encode()
        out.append(b"%d e %d\\n" % (ident, len(message)) + message + b"%d x 127\\n" % ident)
        return None
    return Reader(ident, proc)


def refuse(ident, why, out):
    message = ("watchdog-mux: refused: " + why + "\\n").encode()
    out.append(b"%d e %d\\n" % (ident, len(message)) + message + b"%d x 126\\n" % ident)
    return None


def main():
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    select = selectors.DefaultSelector()
    select.register(0, selectors.EVENT_READ, None)
    readers = {}
    ended = []
    out = [b"watchdog-mux 1\\n"]
    control = b""
    wait = 0.0
    held = False
    while True:
        timeout = 0.005 if ended else None
        if out and wait and not held:
            held = True
            time.sleep(wait)
            timeout = 0
        elif out:
            held = False
            data = b"".join(out)
            del out[:]
            while data:
                data = data[os.write(1, data):]
        for key, _ in select.select(timeout):
            if key.data is None:
                data = os.read(0, 65536)
                if not data:
                    for reader in readers.values():
                        reader.proc.stdin.close()
                    return
                lines = (control + data).split(b"\\n")
                control = lines.pop()
                for line in lines:
                    words = line.split(b" ")
                    verb = words[0]
                    if verb == b"w" and len(words) == 2 and words[1].isdigit():
                        wait = min(int(words[1]), 50) / 1000.0
                        continue
                    if verb == b"o" and len(words) >= 3 and words[1].isdigit():
                        reader = start(words, out)
                        if reader is not None:
                            readers[reader.ident] = reader
                            for fd in reader.pipes:
                                select.register(fd, selectors.EVENT_READ, reader)
                        continue
                    reader = readers.get(int(words[1])) if len(words) == 2 and words[1].isdigit() else None
                    if reader is None:
                        continue
                    if verb == b"c" and not reader.proc.stdin.closed:
                        reader.proc.stdin.close()
                    elif verb == b"p" and not reader.paused:
                        reader.paused = True
                        for fd in reader.pipes:
                            select.unregister(fd)
                    elif verb == b"r" and reader.paused:
                        reader.paused = False
                        for fd in reader.pipes:
                            select.register(fd, selectors.EVENT_READ, reader)
                continue
            reader = key.data
            pipe, kind = reader.pipes[key.fd]
            data = os.read(key.fd, 65536)
            if data:
                out.append(b"%d %s %d\\n" % (reader.ident, kind, len(data)) + data)
                continue
            select.unregister(key.fd)
            del reader.pipes[key.fd]
            pipe.close()
            if not reader.pipes:
                ended.append(reader)
        for reader in ended[:]:
            status = reader.proc.poll()
            if status is not None:
                ended.remove(reader)
                del readers[reader.ident]
                if not reader.proc.stdin.closed:
                    reader.proc.stdin.close()
                out.append(b"%d x %d\\n" % (reader.ident, status))


main()
"""

MUX_PROGRAM = _PROGRAM.replace("@READERS@", repr(READERS))


def mux_command() -> str:
    """The remote command that starts the multiplexer: `python3 -c PROGRAM watchdog-mux`."""
    return shlex.join(["python3", "-c", MUX_PROGRAM, MUX_NAME])


class MuxFailed(Exception):
    """The multiplexer did not start (no python3, a wrapper that refuses it, a python3 too old): why."""

    def __init__(self, why: str, *, refused: bool = False) -> None:
        super().__init__(why)
        self.refused = refused  # the host refused to run it (exit 126: the forced-command wrapper's refusal)


class _End:
    """A reader's end of the multiplexer, in the place of its channel (`CommandOutput._chan`)."""

    def __init__(self, mux: Multiplexer, ident: int) -> None:
        self._mux = mux
        self._ident = ident
        self.status: int | None = None

    def pause_reading(self) -> None:
        self._mux.send(b"p %d\n" % self._ident)

    def resume_reading(self) -> None:
        self._mux.send(b"r %d\n" % self._ident)

    def get_exit_status(self) -> int | None:
        return self.status

    def close(self) -> None:
        self._mux.send(b"c %d\n" % self._ident)


class MuxOutput(CommandOutput):
    """One reader's output through the host's multiplexer: a `CommandOutput` whose channel is its `_End`."""

    def __init__(self, mux: Multiplexer, ident: int) -> None:
        super().__init__()
        self.end = self._chan = _End(mux, ident)

    def ended(self, status: int) -> None:
        """The reader ended with this exit status."""
        self.end.status = status
        self.connection_lost(None)


class Multiplexer(asyncssh.SSHClientSession[bytes]):
    """The session of the multiplexer's channel: starts readers (`open`) and hands each one its frames."""

    def __init__(self) -> None:
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self.conn: asyncssh.SSHClientConnection | None = None  # the connection that carries it (`start_mux`)
        self._outputs: dict[int, MuxOutput] = {}
        self._next = 0
        self._buf = b""
        self._greeted = False
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._errors = b""
        self.closed = False

    # -- the daemon's side ---------------------------------------------------------------------------------

    async def started(self) -> None:
        """Wait for the multiplexer's first line; MuxFailed if it ends (or says something else) first."""
        await self._ready

    def open(self, name: str, args: list[str]) -> MuxOutput:
        """Start reader `name` with `args` on the host: its output (closed at once if the multiplexer has ended)."""
        self._next += 1
        ident = self._next
        output = MuxOutput(self, ident)
        if self.closed:
            output.connection_lost(None)
            return output
        self._outputs[ident] = output
        words = [b"o", b"%d" % ident, name.encode()]
        words += [arg.encode("utf-8", "surrogateescape").hex().encode() for arg in args]
        self.send(b" ".join(words) + b"\n")
        return output

    def send(self, line: bytes) -> None:
        if self._chan is not None and not self.closed:
            self._chan.write(line)

    @property
    def readers(self) -> int:
        """The readers running through it now."""
        return len(self._outputs)

    def close(self) -> None:
        """Close the channel: the multiplexer closes every reader's lifeline and exits."""
        if self._chan is not None:
            self._chan.close()

    # -- asyncssh's callbacks ------------------------------------------------------------------------------

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan
        unlogged_packets(chan)
        direct_data(chan)

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype is not None:  # its own stderr: a traceback, "python3: not found"
            self._errors = (self._errors + data)[-_ERRORS_KEPT:]
            return
        buf = self._buf + data if self._buf else data
        pos = 0
        if not self._greeted:
            newline = buf.find(b"\n")
            if newline < 0:
                self._buf = buf if len(buf) <= len(HELLO) else self._fail(f"it said {buf[:80]!r}")
                return
            if buf[:newline] != HELLO:
                self._buf = self._fail(f"it said {buf[:newline][:80]!r}")
                return
            self._greeted = True
            self._ready.set_result(None)
            pos = newline + 1
        outputs = self._outputs
        size = len(buf)
        while pos < size:
            newline = buf.find(b"\n", pos)
            if newline < 0:
                break
            fields = buf[pos:newline].split(b" ")
            if len(fields) != 3:
                self._buf = self._fail(f"a frame's header is {buf[pos:newline][:80]!r}")
                return
            ident, kind, number = int(fields[0]), fields[1], int(fields[2])
            if kind == b"x":
                pos = newline + 1
                output = outputs.pop(ident, None)
                if output is not None:
                    output.ended(number)
                continue
            end = newline + 1 + number
            if end > size:
                break  # the rest of its bytes come in a later packet
            output = outputs.get(ident)
            if output is not None:
                output.data_received(
                    buf[newline + 1 : end], None if kind == b"o" else asyncssh.EXTENDED_DATA_STDERR
                )
            pos = end
        self._buf = buf[pos:] if pos < size else b""

    def _fail(self, why: str) -> bytes:
        # not the protocol: as if it had ended (each reader starts again, the pool starts another)
        if not self._ready.done():
            self._ready.set_exception(MuxFailed(why))
        self.close()
        return b""

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._ready.done():
            said = self._errors.decode(errors="replace").strip().splitlines()
            status = self._chan.get_exit_status() if self._chan is not None else None
            why = said[-1][:200] if said else "no output"
            self._ready.set_exception(
                MuxFailed(
                    f"it ended before its first line (exit {status}): {why}", refused=status == _REFUSED
                )
            )
        outputs, self._outputs = self._outputs, {}
        for output in outputs.values():
            output.connection_lost(exc)


class Sessions(Protocol):
    """What `start_mux` needs of a pool (`watchdog.follow.sources.sshpool.SSHPool`, which imports this module)."""

    async def open_session(
        self,
        host: str,
        factory: Callable[[], Multiplexer],
        command: str,
        *,
        port: int | None = None,
        user: str | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, Multiplexer]: ...


async def start_mux(
    pool: Sessions, host: str, *, port: int | None = None, user: str | None = None
) -> Multiplexer:
    """Start the multiplexer on the host in a channel of the pool's; MuxFailed if it does not start (the channel
    is closed then). ChannelRefused, ConnectionLost and the rest as from `SSHPool.open_session`."""
    conn, mux = await pool.open_session(host, Multiplexer, mux_command(), port=port, user=user)
    mux.conn = conn
    try:
        await mux.started()
    except MuxFailed as exc:
        mux.close()
        if conn.is_closed():  # the connection was lost meanwhile: no verdict on the host's python3
            raise ConnectionLost(f"connection to {host} lost: {exc}", host=host, reason=str(exc)) from exc
        raise
    except BaseException:
        mux.close()
        raise
    if COALESCE_MS:
        mux.send(b"w %d\n" % COALESCE_MS)
    return mux
