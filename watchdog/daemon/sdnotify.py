"""systemd's notify protocol: READY=1, WATCHDOG=1, STATUS=..., STOPPING=1 on $NOTIFY_SOCKET (no libsystemd).

Without $NOTIFY_SOCKET (not under systemd, or Type= is not notify) every call does nothing.
"""

from __future__ import annotations

import contextlib
import os
import socket


class SystemdNotifier:
    """Sends state lines to systemd over its datagram socket."""

    def __init__(self, address: str | None = None) -> None:
        """Use `address` (default: $NOTIFY_SOCKET; '@' starts an abstract socket name)."""
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = None
        if address:
            self._address = b"\0" + address[1:].encode() if address.startswith("@") else address
        self._sock: socket.socket | None = None

    def notify(self, *lines: str) -> None:
        """Send `lines` ("READY=1", "STATUS=...") as one datagram; a send that fails is dropped."""
        if self._address is None:
            return
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)  # a datagram to a local socket: never waits
        with contextlib.suppress(OSError):  # systemd gone or its queue full: the next message says the same
            self._sock.sendto("\n".join(lines).encode(), self._address)

    def close(self) -> None:
        """Close the socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings: half of $WATCHDOG_USEC (for this process), None if not asked."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2e6 if value > 0 else None
