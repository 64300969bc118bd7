"""`watchdog run` in a subprocess for the tests, its JSON log lines (on standard error) read as they come."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


class DaemonProcess:
    """`watchdog run --config CONFIG ARGS...` (no `--config` for None: the config is `env`'s `LLW_` variables);
    `wait(**fields)` for a log event, `stop()` or `close()`."""

    def __init__(
        self,
        config: Path | None,
        *args: str,
        deadline: float,
        umask: int = -1,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.deadline = deadline
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "watchdog.cli",
                "run",
                *(() if config is None else ("--config", str(config))),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            umask=umask,
            env=env,  # with `cwd`: another copy of the package first on the path (`python -m` puts cwd first)
            cwd=cwd,
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.text: list[str] = []
        assert self.proc.stderr is not None
        stderr = self.proc.stderr

        def read() -> None:
            for line in stderr:
                self.text.append(line)
                try:
                    event = json.loads(line)
                except ValueError:
                    event = None
                self.events.put(event if isinstance(event, dict) else {"event": "text", "text": line})
            self.events.put({"event": "(ended)"})

        threading.Thread(target=read, daemon=True).start()

    def wait(self, deadline: float | None = None, **want: Any) -> dict[str, Any]:
        """The first log event with these fields (already seen, or to come within `deadline` seconds)."""
        for event in self.seen:
            if all(event.get(k) == v for k, v in want.items()):
                return event
        deadline = self.deadline if deadline is None else deadline
        end = time.monotonic() + deadline
        while (left := end - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(event)
            if all(event.get(k) == v for k, v in want.items()):
                return event
        running = "still running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        raise AssertionError(f"no event {want} in {deadline}s ({running}); seen: {self.seen[-15:]}")

    def stop(self) -> str:
        """SIGTERM, exit 0; its standard output."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=self.deadline) == 0, "".join(self.text[-20:])
        assert self.proc.stdout is not None
        return self.proc.stdout.read()

    def close(self) -> None:
        """Kill it if it still runs, and close its pipes."""
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
