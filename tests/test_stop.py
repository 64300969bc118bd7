"""Intended stops are `stopped`, not `crashed`: Ctrl-C, and SGLang's own teardown of its children.

The lines are SGLang's and Python's exact strings (SGLang's SIGCHLD handler logs
"Child process unexpectedly failed with an exit code %d. pid=%d" with the raw wait status, 9 = SIGKILL);
no public issue has the whole log of a Ctrl-C, so they are put together here from those strings.
"""

from __future__ import annotations

from pathlib import Path

from watchdog.core.lifecycle import State
from watchdog.core.verdict import exit_code
from watchdog.follow.replay import replay_path

READY = Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"

CTRL_C = """\
^C[2025-01-23 19:40:02] WARNING:  Child process unexpectedly failed with an exit code 9. pid=889301
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/usr/local/lib/python3.10/dist-packages/sglang/launch_server.py", line 14, in <module>
    launch_server(server_args)
KeyboardInterrupt
"""


def test_ctrl_c_after_ready_is_stopped(tmp_path: Path) -> None:
    """Ctrl-C on a ready server: KeyboardInterrupt and the children's SIGKILL status give `stopped` in phase
    ready, exit 0 (the launch succeeded)."""
    log = tmp_path / "server.log"
    log.write_text(READY.read_text() + CTRL_C)
    _, v = replay_path(log)
    v = v.to_json()
    assert (v["state"], v["phase"], v["error"]) == ("stopped", "ready", None)
    assert exit_code(State.STOPPED, v["phase"]) == 0


def test_stop_before_ready_is_no_verdict() -> None:
    """A launch stopped before it was ready did not succeed: exit 3."""
    assert exit_code(State.STOPPED, "loading_weights") == 3


def test_exit_code_nine_alone_is_not_a_crash(tmp_path: Path) -> None:
    """The launcher's teardown status (9) is no error by itself: a ready server stays ready."""
    log = tmp_path / "server.log"
    log.write_text(READY.read_text() + CTRL_C.splitlines()[0].lstrip("^C") + "\n")
    _, v = replay_path(log)
    v = v.to_json()
    assert v["state"] == "ready"


def test_other_exit_status_is_a_crash(tmp_path: Path) -> None:
    """A child that exited 1 (status 256) with nothing else printed is a crash, with the wrapper as summary."""
    log = tmp_path / "server.log"
    log.write_text(
        READY.read_text()
        + "[2025-01-23 19:40:02] Child process unexpectedly failed with an exit code 256. pid=889301\n"
    )
    _, v = replay_path(log)
    v = v.to_json()
    assert v["state"] == "crashed"
    assert "exit code 256" in v["error"]["summary"]
