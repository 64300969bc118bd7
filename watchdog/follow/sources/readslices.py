"""An SSH connection given what its socket read in slices, and each log's packets of one read as one piece: a
packet costs the same however much came, and a log's packets that piled up cost one chunk.

asyncssh keeps what it has received in one bytes object and cuts each packet off its front (`self._inpbuf =
self._inpbuf[n:]`): a copy of all the rest for every packet. One read of the socket takes up to 256 KiB
(asyncio's), so a connection that carries a hundred logs and is read after a pause (the event loop busy for a
moment, a daemon catching up) brings several hundred small packets at once, and their copies cost as much as
their decryption; that cost grows with the logs a connection carries and with the backlog, just when a daemon
can least afford it. Handed over `READ_SLICE` bytes at a time, the buffer asyncssh cuts from never holds much more
than one slice and one packet. Data split anywhere is what TCP gives it anyway: asyncssh parses it the same.

The read is parsed between `channel.begin_read` and `channel.end_read`: each `CommandOutput` holds the stdout its
packets bring meanwhile and hands it on joined at the end (before a stderr line or its close, if one comes after
it), so a log whose packets piled up in the socket (ten a log in a full read of a connection of a hundred logs) is
fed, checkpointed and looked at once for them all, not once a packet: the busier the daemon, the fewer chunks a
line costs. Nothing waits for it: it is handed on in the same callback.

It replaces the connection's `data_received` (the protocol method the socket's transport calls) and looks at its
`_transport` (asyncssh's: None once it has dropped the connection); where a version of asyncssh has either not,
the connection is left as it is (`read_in_slices` returns False).

It also makes the socket's transport read at most `READ_MAX` bytes a turn of the event loop (asyncio's selector
transport reads `max_size`, 256 KiB, at each turn the socket is readable). A daemon that fell behind (a long
callback, a relaunch wave) finds every connection's socket full, and what a read brings is parsed, fed and judged
in the callback that reads it: 20 hosts' 256 KiB reads can make one turn of seconds of work at 2,000 launches, and
each of the two task switches between a crash's line and its transition (the follower's task, the daemon's
consumer) waits for a whole turn. Read `READ_MAX` at a time, a turn holds at most that much of each connection's
work; the rest waits in the kernel's socket buffer (the SSH window then holds the host's writes back, as before) and
comes at the next turns in the same order: the same bytes, shorter turns. (Measured at 2,000 launches on the quiet
machine only together with the rest of its round, not alone: docs/benchmarks.md, nineteenth round.)
"""

from __future__ import annotations

from typing import Any

from watchdog.follow.sources.channel import begin_read, end_read

__all__ = ["READ_MAX", "READ_SLICE", "read_in_slices"]

# bytes handed to asyncssh at a time: dozens of log packets, a few of the largest (32 KiB) data packets' worth
READ_SLICE = 16 * 1024
# bytes the socket's transport reads at a turn of the event loop: two slices, a largest data packet (32 KiB and its
# header and MAC) in at most two turns
READ_MAX = 2 * READ_SLICE


def read_in_slices(conn: Any) -> bool:
    """Make `conn` (an `asyncssh.SSHClientConnection`, as its client's `connection_made` gets it) take what its
    socket read in slices of at most `READ_SLICE` bytes; whether it was done."""
    receive = getattr(conn, "data_received", None)
    if receive is None or not hasattr(conn, "_transport"):
        return False
    transport = conn._transport
    if isinstance(getattr(transport, "max_size", None), int):  # asyncio's socket transport (not a tunnel's)
        transport.max_size = READ_MAX

    def data_received(data: bytes, datatype: Any = None) -> None:
        first = begin_read()
        try:
            if len(data) <= READ_SLICE:
                receive(data, datatype)
                return
            for start in range(0, len(data), READ_SLICE):
                # asyncssh dropped the connection for what a slice held (no packet, a disconnect): no more is read
                if conn._transport is None:
                    return
                receive(data[start : start + READ_SLICE], datatype)
        finally:
            if first:
                end_read()

    conn.data_received = data_received
    return True
