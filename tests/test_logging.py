"""The daemon's own log, as a process writes it to a pipe or a terminal: tracebacks in JSON, no local variables,
no colour codes off a terminal or with NO_COLOR, and the standard library's loggers in the same format."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from watchdog.daemon.logs import _json_line, _UtcStamper

SECRET = "https://hooks.slack.com/services/T0000/B0000/XyZsecretTOKEN42"
ESC = "\x1b["
DEADLINE = 60
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
READY_LOG = (
    Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
)

# What a daemon logs: one of its own errors with a traceback (a local variable of the raising frame holds a
# webhook URL), a warning, and asyncssh's and aiohttp's standard-library records (one with a traceback).
SCRIPT = f"""
import logging, sys
import structlog
from watchdog.daemon.service import configure_logging

configure_logging(sys.argv[1])
log = structlog.get_logger("watchdog.alerts")

def deliver(url):
    webhook_url = url
    raise ConnectionError("the receiver refused the alert")

try:
    deliver({SECRET!r})
except ConnectionError:
    log.exception("alert not delivered", notifier="team")
log.warning("host unreachable", launch="kimi", host="gpu1")
logging.getLogger("asyncssh").warning("Connection to %s lost", "gpu1")
logging.getLogger("asyncssh").info("Opening SSH connection to gpu1")  # below the foreign level: not shown
try:
    deliver({SECRET!r})
except ConnectionError:
    logging.getLogger("aiohttp.server").exception("Error handling request")
"""


def _run(log_format: str, **env: str) -> str:
    """The script's standard error, through a pipe."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, log_format],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={**_env(), **env},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        env.pop(name, None)
    return env


def _run_on_a_terminal(log_format: str, script: str = SCRIPT, **env: str) -> str:
    """The script's standard error when it is a terminal (a pty)."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, log_format],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=child,
            env={**_env(), "TERM": "xterm-256color", **env},
        )
        os.close(child)
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=DEADLINE) == 0
    finally:
        os.close(main)
    return b"".join(chunks).decode(errors="replace")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_log_has_tracebacks_and_library_records_but_no_locals() -> None:
    """JSON: every line is an object; an exception carries its traceback text (not just exc_info: true);
    asyncssh's and aiohttp's records are objects of the same shape, with their logger; no local variable
    (the webhook URL) and no colour code anywhere."""
    out = _run("json")
    assert ESC not in out
    assert "XyZsecretTOKEN42" not in out
    events = _events(out)  # every line parses
    by_event = {e["event"]: e for e in events}
    assert set(by_event) == {
        "alert not delivered",
        "host unreachable",
        "Connection to gpu1 lost",
        "Error handling request",
    }
    ours = by_event["alert not delivered"]
    assert ours["level"] == "error"
    assert "exc_info" not in ours
    assert ours["exception"].startswith("Traceback (most recent call last):")
    assert "in deliver" in ours["exception"]
    assert ours["exception"].rstrip().endswith("ConnectionError: the receiver refused the alert")
    ssh = by_event["Connection to gpu1 lost"]
    assert ssh["level"] == "warning"
    assert ssh["logger"] == "asyncssh"
    assert ssh["timestamp"].endswith("Z")
    aiohttp = by_event["Error handling request"]
    assert aiohttp["logger"] == "aiohttp.server"
    assert "ConnectionError: the receiver refused the alert" in aiohttp["exception"]


def test_console_log_in_a_pipe_has_no_colour_and_no_locals() -> None:
    """Console into a pipe (a file, journald): no escape codes; tracebacks without local variables; the
    standard library's records in the same line format."""
    out = _run("console")
    assert ESC not in out
    assert "XyZsecretTOKEN42" not in out
    assert "Traceback (most recent call last):" in out
    assert "ConnectionError: the receiver refused the alert" in out
    (ssh,) = [line for line in out.splitlines() if "Connection to gpu1 lost" in line]
    assert "[warning" in ssh
    assert "[asyncssh]" in ssh
    assert "Opening SSH connection" not in out


@pytest.mark.parametrize(
    ("env", "coloured"),
    [
        pytest.param({}, True, id="terminal"),
        pytest.param({"NO_COLOR": "1"}, False, id="terminal-NO_COLOR"),
    ],
)
def test_console_colours_only_on_a_terminal_without_no_color(env: dict[str, str], coloured: bool) -> None:
    """On a terminal the console log is coloured, unless NO_COLOR is set; no local variable either way."""
    out = _run_on_a_terminal("console", **env)
    assert "alert not delivered" in out
    assert (ESC in out) is coloured
    assert "XyZsecretTOKEN42" not in out


# Text from elsewhere with a bell, backspaces, a one-character CSI (U+009B) and NEL (U+0085) in it: in an
# event's field, in an exception's message (its traceback), in a library's record.
RINGING = "bad\x07 key\x08\x08 \u009b2J\u0085 done"
CONTROLS_SCRIPT = f"""
import logging, sys
import structlog
from watchdog.daemon.service import configure_logging

configure_logging(sys.argv[1])
log = structlog.get_logger("watchdog.daemon")
log.warning("host refused us", error={RINGING!r})
try:
    raise ConnectionError({RINGING!r})
except ConnectionError:
    log.exception("notifier failed", notifier="team")
logging.getLogger("asyncssh").warning("Connection lost: %s", {RINGING!r})
"""


def test_console_log_on_a_terminal_writes_no_control_character() -> None:
    """The console log on a terminal: BEL, backspace and C1 controls in a field, in an exception's message (its
    traceback) and in a library's record are not written (only the colours' own escapes are)."""
    out = _run_on_a_terminal("console", CONTROLS_SCRIPT)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out).replace("\r\n", "\n")
    assert text.count("bad key 2J done") == 3, text
    assert "ConnectionError: bad key 2J done" in text
    assert re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) == []


def test_a_running_daemon_s_console_output_has_no_control_character(tmp_path: Path) -> None:
    """`watchdog run` with `log_format = "console"` and a console notifier follows a launch that crashes on a
    line with BEL, backspaces, a C1 CSI and NEL: what it writes (its log and the console alerts) names the
    crash and holds none of them."""
    from daemon_process import DaemonProcess  # noqa: PLC0415
    from test_remember import Hook  # noqa: PLC0415

    hook = Hook()
    log = tmp_path / "bell.log"
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "console"

[notifiers.console]
kind = "console"

[notifiers.hook]
kind = "webhook"
url = "{hook.url}"

[launches.bell]
log = "{log}"
notify = ["console", "hook"]
"""
    )
    lines = READY_LOG.read_bytes().splitlines(keepends=True)
    crash = (
        "[2025-01-23 19:35:21 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/srt/managers/scheduler.py", line 1200, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args)\n"
        f"RuntimeError: Not enough memory. {RINGING}\n"
    )
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        log.write_bytes(b"".join(lines[:12]) + crash.encode())
        hook.wait_for("bell/1/crashed", deadline=DEADLINE)
        stdout = daemon.stop()
    finally:
        daemon.close()
        hook.close()
    written = stdout + "".join(daemon.text)
    assert "Not enough memory. bad key 2J done" in stdout  # the console alert names the crash
    assert re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f]", written) == []


def test_each_event_is_one_write_to_the_stream() -> None:
    """An event reaches the stream as one write of its whole line (a system call each on an unbuffered standard
    error, and a reader of the pipe never sees half a line)."""
    import structlog  # noqa: PLC0415 - as the daemon imports it

    from watchdog.daemon.logs import configure_logging  # noqa: PLC0415

    stream = _Writes()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("json", stream, cache=False)  # type: ignore[arg-type]  # a stream's surface
        structlog.get_logger("watchdog.daemon").info("transition", launch="kimi", state="ready")
    finally:  # as it was: the other tests of this process log as before
        structlog.reset_defaults()
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    [line] = stream.writes
    assert line.endswith("\n")
    assert json.loads(line)["state"] == "ready"


class _Writes:
    """A stream that keeps each write (standard error's stand-in)."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_the_lines_of_one_loop_turn_go_out_in_one_write_at_its_next_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lines an event loop's callback logs (a relaunch's transitions, read in one go) are held and written
    together, in order and in one write, at the loop's next turn: a crash's line is out within a turn; a line
    logged with no loop running is written at once."""
    import asyncio  # noqa: PLC0415

    import structlog  # noqa: PLC0415 - as the daemon imports it

    from watchdog.daemon.logs import configure_logging  # noqa: PLC0415

    stream = _Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    seen: list[list[str]] = []

    async def turn() -> None:
        log = structlog.get_logger("watchdog.daemon")
        for state in ("starting", "loading_weights", "ready"):
            log.info("transition", launch="kimi", state=state)
        seen.append(stream.writes[:])  # nothing written within the turn
        await asyncio.sleep(0)  # the loop's next turn
        seen.append(stream.writes[:])

    try:
        configure_logging("json", cache=False)
        asyncio.run(turn())
        structlog.get_logger("watchdog.daemon").info("stopping")
    finally:  # as it was: the other tests of this process log as before
        structlog.reset_defaults()
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    assert seen[0] == []
    [batch] = seen[1]
    assert [json.loads(line)["state"] for line in batch.splitlines()] == [
        "starting",
        "loading_weights",
        "ready",
    ]
    assert len(stream.writes) == 2
    assert json.loads(stream.writes[1])["event"] == "stopping"


# A line logged by a loop's last callback, the loop stopped and closed before its next turn: held, then written at
# the process's exit; and one held when the process ends by os._exit, written by `flush_log` first.
HELD_SCRIPT = """
import asyncio, os, sys
import structlog
from watchdog.daemon.logs import configure_logging, flush_log

configure_logging("json")
log = structlog.get_logger("watchdog.daemon")
loop = asyncio.new_event_loop()

def last() -> None:
    log.info("transition", launch="kimi", state="crashed")
    loop.stop()

loop.call_soon(last)
loop.run_forever()
loop.close()
if sys.argv[1] == "os._exit":
    loop = asyncio.new_event_loop()
    def stop_now() -> None:
        log.warning("stopping at once")
        flush_log()
        os._exit(3)
    loop.call_soon(stop_now)
    loop.run_forever()
"""


@pytest.mark.parametrize("end", ["exit", "os._exit"])
def test_held_lines_reach_stderr_when_the_process_ends(end: str) -> None:
    """No held line is lost when the process ends: one logged in a loop's last turn is written at exit, and one
    held before an `os._exit` (the daemon's second SIGTERM) is written by `flush_log`."""
    result = subprocess.run(
        [sys.executable, "-c", HELD_SCRIPT, end],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=_env(),
        check=False,
    )
    assert result.returncode == (3 if end == "os._exit" else 0), result.stderr
    events = [e["event"] for e in _events(result.stderr)]
    assert events == ["transition"] + (["stopping at once"] if end == "os._exit" else [])


def test_the_daemon_loads_no_rich(tmp_path: Path) -> None:
    """`watchdog run` imports structlog with rich hidden from it (structlog looks for rich for its console
    tracebacks, which the daemon renders itself): none of rich's modules (6 MB of memory) is loaded, even with
    the console format, whose renderer is structlog's (its tracebacks: `test_console_log_in_a_pipe_...`)."""
    log = tmp_path / "a.log"
    log.write_bytes(READY_LOG.read_bytes())
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "console"\n\n'
        f'[launches.a]\nlog = "{log}"\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "watchdog.cli", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stderr is not None
    imported: list[str] = []
    try:
        for line in proc.stderr:  # the import times first, then the daemon's log
            if line.startswith("import time:"):
                imported.append(line.rsplit("|", 1)[1].strip())
            elif "ready" in line:  # the launch's verdict: the daemon runs
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE)
    assert "structlog" in imported
    # (a refused import is timed too: `rich` alone; structlog's real one loads rich.console and rich.traceback)
    assert [name for name in imported if name.startswith("rich.")] == []


@given(st.integers(min_value=0, max_value=(1 << 35) * 1_000_000), st.booleans())
def test_the_timestamp_is_written_as_structlog_s_iso_utc_stamper_writes_it(micros: int, whole: bool) -> None:
    """The daemon's stamper writes each time as structlog's `TimeStamper(fmt="iso", utc=True)` does
    (`datetime.isoformat` with Z: no fraction when it is zero), whatever second it has seen before."""
    micros -= micros % 1_000_000 if whole else 0
    stamper = _UtcStamper()
    expected = (EPOCH + timedelta(microseconds=micros)).isoformat().replace("+00:00", "Z")
    assert stamper.text(micros - 1_000_000 if micros >= 1_000_000 else micros + 1) != expected
    assert stamper.text(micros) == expected
    assert stamper.text(micros) == expected  # the second's text as kept


class _Custom:
    def __structlog__(self) -> str:
        return "custom"


def test_a_json_line_is_structlog_s_json_renderer_s() -> None:
    """The daemon's JSON of an event is the text of structlog's own `JSONRenderer` (json.dumps with its
    fallback: a value's `__structlog__()`, else its repr)."""
    event = {"event": "transition", "launch": "l-0042", "line": 12, "reason": "Größe", "at": Path("/x"),
             "custom": _Custom(), "nested": {"ranks": ["TP0"], "ratio": 1.5e-07}}  # fmt: skip
    assert _json_line(event) == structlog.processors.JSONRenderer()(None, "info", dict(event))
