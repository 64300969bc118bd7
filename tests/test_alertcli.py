"""`watchdog test-notify` and `watchdog silence`, run as a user runs them, against real receivers and state."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from http_receiver import SECRET_PATH, Answer, running_receiver

from watchdog.store import open_store

pytestmark = pytest.mark.anyio
DEADLINE = 60.0


async def _cli(*args: str) -> tuple[int, str, str]:
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process([sys.executable, "-m", "watchdog.cli", *args], check=False)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def _config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        f'[launches.kimi]\nlog = "{tmp_path / "kimi.log"}"\nnotify = ["team"]\n'
        f'[notifiers.team]\nkind = "slack"\nurl = "{url}"\n'
    )
    return config


async def test_test_notify_sends_a_sample_the_service_takes(tmp_path: Path) -> None:
    """A sample crash reaches the Slack receiver, marked as a test; the URL is never printed."""
    async with running_receiver() as receiver:
        code, out, err = await _cli("test-notify", "team", "--config", str(_config(tmp_path, receiver.url())))
    assert code == 0, err
    assert out.strip() == "notifiers.team (slack) URL 1/1: delivered a sample crashed alert"
    (got,) = receiver.got
    body = got.json()
    assert "crashed" in body["text"]
    assert "[TEST] RuntimeError: Not enough memory" in str(body["blocks"])
    assert SECRET_PATH not in out + err


async def test_test_notify_says_when_the_service_refuses(tmp_path: Path) -> None:
    """A 400 is exit 69 with the receiver's host only, not its secret path."""
    async with running_receiver() as receiver:
        receiver.script = [Answer(400, body="invalid_payload")]
        code, out, err = await _cli("test-notify", "team", "--config", str(_config(tmp_path, receiver.url())))
    assert code == 69
    assert "not delivered" in err
    assert f"http://127.0.0.1:{receiver.port}" in err
    assert SECRET_PATH not in out + err


async def test_test_notify_of_an_unknown_notifier_is_a_usage_error(tmp_path: Path) -> None:
    """An unknown NAME is exit 64, naming the notifiers there are."""
    code, _, err = await _cli(
        "test-notify", "nope", "--config", str(_config(tmp_path, "https://x.example/h"))
    )
    assert code == 64
    assert "its notifiers: team" in err


async def test_silence_adds_lists_and_ends_in_the_state_store(tmp_path: Path) -> None:
    """`silence kimi 2h` is in the store the daemon reads; listed; `--off` ends it; unknown launch: 64."""
    config = str(_config(tmp_path, "https://x.example/h"))
    code, out, _ = await _cli("silence", "kimi", "2h", "--config", config)
    assert code == 0
    assert out.startswith("kimi: alerts silenced for 2h00m, until ")
    async with open_store(tmp_path / "state") as store:
        (until,) = (await store.silences()).values()
    code, out, _ = await _cli("silence", "--config", config)
    assert out.startswith("kimi: silenced until ")
    code, out, _ = await _cli("silence", "kimi", "--off", "--config", config)
    assert out.strip() == "kimi: silence ended"
    async with open_store(tmp_path / "state") as store:
        assert await store.silences() == {}
    code, _, err = await _cli("silence", "other", "1h", "--config", config)
    assert code == 64
    assert "its launches: kimi" in err
    code, _, err = await _cli("silence", "kimi", "soon", "--config", config)
    assert code == 64
    assert "DURATION 'soon'" in err
    assert until > 0
