"""An SSH connection's keepalive timer re-armed lazily: a read notes the time, the timer looks at it when due.

asyncssh re-arms its keepalive timer at every read from the socket (the timer cancelled, a new one made and put
in the event loop's heap): a connection carrying a hundred logs does that hundreds of times a second, for a
timer that only has to fire once the connection has been quiet for `keepalive_interval`. Here a read only notes
when it came; the timer, when due, sees whether the connection was quiet that long: if so it does what
asyncssh's does (a keepalive request, or the connection dropped after `keepalive_count_max` unanswered), else
it waits the rest of the interval from the last read. What a peer that stops answering sees is the same.

It reaches into asyncssh's connection (its `_reset_keepalive_timer` and `_keepalive_timer_callback`); where a
version of asyncssh has no such methods the connection is left as it is (`lazy_keepalive` returns False).
"""

from __future__ import annotations

from typing import Any

__all__ = ["lazy_keepalive"]

_NEEDS = ("_reset_keepalive_timer", "_keepalive_timer_callback", "_set_keepalive_timer", "_loop")


def lazy_keepalive(conn: Any) -> bool:
    """Make `conn` (an `asyncssh.SSHClientConnection`, as its client's `connection_made` gets it) re-arm its
    keepalive timer lazily; whether it was done."""
    if not all(hasattr(conn, name) for name in _NEEDS):
        return False
    loop = conn._loop
    fire = conn._keepalive_timer_callback  # asyncssh's: count, drop or ask, and arm the timer again
    last = [loop.time()]  # when the socket was last read

    def reset() -> None:
        # asyncssh's `_reset_keepalive_timer`, at every read: the time noted; a timer armed only if none is
        if conn._auth_complete:
            last[0] = loop.time()
            if conn._keepalive_timer is None:
                conn._set_keepalive_timer()

    def due() -> None:
        interval = conn._keepalive_interval
        if not interval:
            conn._keepalive_timer = None
            return
        quiet = loop.time() - last[0]
        if quiet < interval:  # read from since it was armed: due an interval after that read
            conn._keepalive_timer = loop.call_later(interval - quiet, due)
            return
        fire()

    conn._reset_keepalive_timer = reset
    conn._keepalive_timer_callback = due  # what `_set_keepalive_timer` arms
    return True
