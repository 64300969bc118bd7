"""`watchdog watch` interrupted (Ctrl-C) says where the launch was, and exits 130; a log that never came is
said as such, not as a launch that hung."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

from pty_screen import PtyScreen
from test_liveview_pty import CORPUS_LOG, _watchdog

STEP = 20.0


def _loading(tmp_path: Path) -> Path:
    """A log of an SGLang launch loading its weights."""
    corpus = CORPUS_LOG.read_text(encoding="utf-8").splitlines()
    load_at = next(i for i, line in enumerate(corpus) if "Load weight begin" in line)
    log = tmp_path / "server.log"
    log.write_text("\n".join(corpus[: load_at + 1]) + "\n", encoding="utf-8")
    return log


def _until_line(proc: subprocess.Popen[str], needle: str) -> str:
    """Read `proc`'s standard output until a line holds `needle` (within STEP seconds)."""
    assert proc.stdout is not None
    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if needle in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(STEP), f"no {needle!r} in {seen}"
    return "".join(seen)


def test_ctrl_c_on_a_terminal_prints_where_the_launch_was(tmp_path: Path) -> None:
    """Ctrl-C on the live view: the view goes, a line says the phase it was in and the log, exit 130."""
    log = _loading(tmp_path)
    with PtyScreen([*_watchdog(), "watch", str(log)], columns=160, lines=40, cwd=tmp_path) as term:
        term.wait_for(lambda text: "loading_weights" in text, STEP, "the live view in loading_weights")
        # what the terminal's interrupt character sends (the pty is not the command's controlling terminal)
        term.process.send_signal(signal.SIGINT)
        assert term.wait_exit(STEP) == 130
        text = term.text
    assert "interrupted: loading_weights for " in text
    assert str(log) in text


def test_ctrl_c_without_a_terminal_prints_where_and_json_gives_the_object(tmp_path: Path) -> None:
    """SIGINT to `watch` (plain, then --json): exit 130; stderr says where the launch was; --json prints the
    verdict object as it stands, marked interrupted."""
    log = _loading(tmp_path)
    with subprocess.Popen(
        [*_watchdog(), "watch", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as plain:
        _until_line(plain, "-> loading_weights")
        plain.send_signal(signal.SIGINT)
        assert plain.wait(STEP) == 130
        assert plain.stderr is not None
        said = plain.stderr.read()
    assert said.startswith("watchdog: interrupted: loading_weights for "), said
    with subprocess.Popen(
        [*_watchdog(), "watch", str(log), "--json", "--events", str(tmp_path / "events.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as scripted:
        events = tmp_path / "events.jsonl"
        end = time.monotonic() + STEP
        while '"loading_weights"' not in (events.read_text() if events.exists() else ""):
            assert time.monotonic() < end, "watch --json never reached loading_weights"
            time.sleep(0.05)
        scripted.send_signal(signal.SIGINT)
        assert scripted.wait(STEP) == 130
        assert scripted.stdout is not None
        verdict = json.loads(scripted.stdout.read())
    assert (verdict["state"], verdict["interrupted"]) == ("loading_weights", True)


def test_a_log_that_never_comes_is_said_as_missing_not_as_a_hang(tmp_path: Path) -> None:
    """`watch` on a path that never appears: the line and the verdict name the missing file (no stalled phase),
    --json keeps the state `pending` with `missing_log` (path, since, seconds), and it exits 2 (stalled or timed
    out) after --stall-after."""
    never = tmp_path / "nver.log"
    text = subprocess.run(
        [*_watchdog(), "watch", str(never), "--stall-after", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=STEP,
    )
    assert text.returncode == 2
    verdict_lines = text.stdout.splitlines()[-2:]
    assert verdict_lines[0].startswith(f"no log: {never} does not exist (waited ")
    assert verdict_lines[1] == "  a typo in the log's path, or a launch that never started"
    assert "no progress" not in text.stdout
    assert "stalled" not in text.stdout
    assert "pending: no log after 1s" in text.stdout
    scripted = subprocess.run(
        [*_watchdog(), "watch", str(never), "--stall-after", "1", "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=STEP,
    )
    assert scripted.returncode == 2
    verdict = json.loads(scripted.stdout)
    assert (verdict["state"], verdict["phase"]) == ("pending", "pending")
    assert verdict["missing_log"]["path"] == str(never)
    assert verdict["missing_log"]["overdue"] is True
    assert verdict["missing_log"]["seconds"] >= 1.0
    assert verdict["missing_log"]["since"].endswith("Z")
