"""Run a command in a pseudo-terminal and read what a person would see on its screen (a `pyte` terminal).

    with PtyScreen([...], columns=140, lines=40) as term:
        term.wait_for(lambda text: "ready" in text, timeout=10)
        term.snapshots  # every distinct screen, with the monotonic time it appeared

A background thread reads the terminal's output into a `pyte.Screen`; `wait_for` waits on a condition that
the thread signals after each read, until a deadline (no sleeping and polling).
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import pyte

__all__ = ["PtyScreen", "ScreenTimeout", "Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """A screen as it was at a moment (`time.monotonic()`): lines joined by newlines, right spaces cut."""

    at: float
    text: str


class ScreenTimeout(AssertionError):
    """The screen did not come to show what was waited for; the message holds the last screen."""


class PtyScreen:
    """A command running on a pseudo-terminal of `columns` x `lines`, with TERM=xterm-256color."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        columns: int = 120,
        lines: int = 40,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.columns, self.lines = columns, lines
        self.screen = pyte.Screen(columns, lines)
        self._stream = pyte.ByteStream(self.screen)
        self._changed = threading.Condition()
        self.snapshots: list[Snapshot] = []
        self.raw = bytearray()  # everything the command wrote, for a failure's message
        self.eof = False
        full_env = dict(os.environ if env is None else env)
        for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
            full_env.pop(name, None)  # would change how rich treats the terminal
        full_env.update(TERM="xterm-256color", COLUMNS=str(columns), LINES=str(lines))
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        try:
            self.process = subprocess.Popen(
                list(argv),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)  # the child holds it now: its exit makes our reads fail with EIO (end of output)
        self._master = master
        self._reader = threading.Thread(target=self._read, name="pty-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                data = b""
            with self._changed:
                if not data:
                    self.eof = True
                    self._changed.notify_all()
                    return
                self.raw += data
                self._stream.feed(data)
                text = self._text()
                if not self.snapshots or self.snapshots[-1].text != text:
                    self.snapshots.append(Snapshot(time.monotonic(), text))
                self._changed.notify_all()

    def _text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip("\n")

    @property
    def text(self) -> str:
        """The screen now."""
        with self._changed:
            return self._text()

    def wait_for(self, predicate: Callable[[str], bool], timeout: float, what: str = "") -> str:
        """Wait until `predicate(screen text)` holds and return that text; ScreenTimeout after `timeout` s.

        The predicate is called with the lock held, after each read (so it may also look at `snapshots`).
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                text = self._text()
                if predicate(text):
                    return text
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    why = "the command's output ended" if self.eof else f"{timeout:g} s passed"
                    raise ScreenTimeout(
                        f"{why} before the screen showed {what or 'what was waited for'}; "
                        f"exit code {self.process.poll()}; the screen:\n{text}"
                    )
                self._changed.wait(left)

    def snapshots_since(self, since: float) -> list[Snapshot]:
        """The distinct screens that appeared at or after monotonic time `since`."""
        with self._changed:
            return [s for s in self.snapshots if s.at >= since]

    def write(self, data: bytes) -> None:
        """Type `data` on the terminal."""
        os.write(self._master, data)

    def wait_exit(self, timeout: float) -> int:
        """Wait for the command to exit and for the last of its output; its exit code."""
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def close(self) -> None:
        """Kill the command if it still runs, and release the terminal."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(10)
        os.close(self._master)

    def __enter__(self) -> PtyScreen:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
