"""An SSH connection given what its socket read in slices, so that a packet costs the same however much came.

asyncssh keeps what it has received in one bytes object and cuts each packet off its front (`self._inpbuf =
self._inpbuf[n:]`): a copy of all the rest for every packet. One read of the socket takes up to 256 KiB
(asyncio's), so a connection that carries a hundred logs and is read after a pause (the event loop busy for a
moment, a daemon catching up) brings several hundred small packets at once, and their copies cost as much as
their decryption; that cost grows with the logs a connection carries and with the backlog, just when a daemon
can least afford it. Handed over `READ_SLICE` bytes at a time, the buffer asyncssh cuts from never holds much more
than one slice and one packet. Data split anywhere is what TCP gives it anyway: asyncssh parses it the same.

It replaces the connection's `data_received` (the protocol method the socket's transport calls) and looks at its
`_transport` (asyncssh's: None once it has dropped the connection); where a version of asyncssh has either not,
the connection is left as it is (`read_in_slices` returns False).
"""

from __future__ import annotations

from typing import Any

__all__ = ["READ_SLICE", "read_in_slices"]

# bytes handed to asyncssh at a time: dozens of log packets, a few of the largest (32 KiB) data packets' worth
READ_SLICE = 16 * 1024


def read_in_slices(conn: Any) -> bool:
    """Make `conn` (an `asyncssh.SSHClientConnection`, as its client's `connection_made` gets it) take what its
    socket read in slices of at most `READ_SLICE` bytes; whether it was done."""
    receive = getattr(conn, "data_received", None)
    if receive is None or not hasattr(conn, "_transport"):
        return False

    def data_received(data: bytes, datatype: Any = None) -> None:
        if len(data) <= READ_SLICE:
            receive(data, datatype)
            return
        for start in range(0, len(data), READ_SLICE):
            # asyncssh dropped the connection for what a slice held (no packet, a disconnect): no more is read
            if conn._transport is None:
                return
            receive(data[start : start + READ_SLICE], datatype)

    conn.data_received = data_received
    return True
