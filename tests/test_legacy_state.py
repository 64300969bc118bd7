"""An upgrade from before the rename: state left in /var/lib/watchdog is never silently replaced by an empty one.

The daemon on the default state_dir (/var/lib/llm-launch-watchdog), which has no state file, refuses to start
(exit 78) while the old default /var/lib/watchdog holds one, and says how to move it. The end-to-end test runs
the real CLI on the real default paths, in a mount namespace of its own (`unshare --mount`, a tmpfs over
/var/lib), so the machine's /var/lib is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchdog.exceptions import ConfigError
from watchdog.store import DB_NAME, refuse_legacy_state
from watchdog.vocabulary import DEFAULT_STATE_DIR, LEGACY_STATE_DIR

TESTS = Path(__file__).parent


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    """A (default, legacy) pair of state directories, in a folder any user may enter (as /var/lib); the legacy
    one holds a state file."""
    top = Path(tempfile.mkdtemp(prefix="watchdog-legacy-"))
    top.chmod(0o755)
    new, old = top / "llm-launch-watchdog", top / "watchdog"
    old.mkdir()
    (old / DB_NAME).write_bytes(b"")
    try:
        yield new, old
    finally:
        if old.is_dir():
            old.chmod(0o700)
        shutil.rmtree(top)


@pytest.mark.parametrize(
    "new_exists", [pytest.param(False, id="no-new-dir"), pytest.param(True, id="empty-new-dir")]
)
def test_refused_while_the_old_default_holds_the_state(dirs: tuple[Path, Path], new_exists: bool) -> None:
    """No state file in the default directory (missing, or empty as systemd makes it) and one in the old: 78."""
    new, old = dirs
    if new_exists:
        new.mkdir()
    with pytest.raises(ConfigError) as caught:
        refuse_legacy_state(new, default=new, legacy=old)
    message = str(caught.value)
    assert message.startswith(
        f"{new}: daemon.state_dir: no state file here, but {old / DB_NAME} holds the state"
    )
    assert f"mkdir -p {new} && mv {old / DB_NAME}* {new}/ && chown -R llm-launch-watchdog" in message


@pytest.mark.parametrize(
    "case",
    [
        pytest.param("new-has-state", id="the-default-has-its-own-state"),
        pytest.param("not-default", id="another-state-dir-configured"),
        pytest.param("old-empty", id="the-old-directory-holds-no-state-file"),
        pytest.param("no-old", id="no-old-directory"),
    ],
)
def test_started_otherwise(dirs: tuple[Path, Path], tmp_path: Path, case: str) -> None:
    """Nothing is refused once the default has a state file, for another state_dir, or with no old state."""
    new, old = dirs
    state_dir = new
    if case == "new-has-state":
        new.mkdir()
        (new / DB_NAME).write_bytes(b"")
    elif case == "not-default":
        state_dir = tmp_path / "elsewhere"
    elif case == "old-empty":
        (old / DB_NAME).unlink()
    else:
        shutil.rmtree(old)
    refuse_legacy_state(state_dir, default=new, legacy=old)


def test_refused_when_the_old_directory_cannot_be_looked_into(dirs: tuple[Path, Path]) -> None:
    """An old directory this user may not enter (0700, the old user's) may hold the state: refused, and said so."""
    new, old = dirs
    if os.geteuid() == 0:  # root enters any directory: ask as nobody
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv(1) to drop to another user")
        code = (
            "import sys; from pathlib import Path; from watchdog.store import refuse_legacy_state\n"
            "try:\n    refuse_legacy_state(sys.argv[1], default=sys.argv[1], legacy=sys.argv[2])\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)"
        )
        os.chmod(old, 0o700)
        result = subprocess.run(
            [
                setpriv,
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-c",
                code,
                str(new),
                str(old),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        said = result.stdout
        assert result.returncode == 0, result.stderr
    else:
        os.chmod(old, 0o000)
        try:
            with pytest.raises(ConfigError) as caught:
                refuse_legacy_state(new, default=new, legacy=old)
        finally:
            os.chmod(old, 0o700)
        said = f"ConfigError {caught.value}"
    assert said.startswith(f"ConfigError {new}: daemon.state_dir: no state file here, and {old} ")
    assert "cannot be looked into by this user" in said


DRIVER = """
import json, os, re, subprocess, sys
sys.path.insert(0, sys.argv[1])
from daemon_process import DaemonProcess
config, out = sys.argv[2], {}
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/var/lib"], check=True)
cli = [sys.executable, "-m", "watchdog.cli"]
def run(*argv):
    r = subprocess.run([*cli, *argv], capture_output=True, text=True, timeout=120)
    return [r.returncode, r.stdout, r.stderr]
out["old"] = run("silence", "kimi-ep", "2h", "--state-dir", "/var/lib/watchdog")
out["refused"] = run("run", "--config", config)
out["silence_refused"] = run("silence", "other", "1h")
out["history_refused"] = run("history")
out["made_there"] = sorted(os.listdir("/var/lib/llm-launch-watchdog")) if os.path.isdir("/var/lib/llm-launch-watchdog") else []
move = re.search(r"as root: (mkdir .*?) && chown ", out["refused"][2])
out["moved"] = subprocess.run(move.group(1), shell=True).returncode if move else None
out["silences"] = run("silence")
daemon = DaemonProcess(config, deadline=60)
try:
    daemon.wait(event="http_listening")
    daemon.stop()
    out["started"] = True
finally:
    daemon.close()
print(json.dumps(out))
"""


def test_an_upgraded_daemon_refuses_then_starts_on_the_moved_state(tmp_path: Path) -> None:
    """On the real paths: old state in /var/lib/watchdog, `run` (and `silence`, `history`) exit 78 naming both,
    making nothing; after the move it names, the old state (a silence) is in the new default and the daemon
    starts."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a mount namespace of its own")
    probe = subprocess.run([unshare, "--mount", "true"], capture_output=True, check=False, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"unshare --mount is not allowed here: {probe.stderr.decode().strip()}")
    assert (DEFAULT_STATE_DIR, LEGACY_STATE_DIR) == ("/var/lib/llm-launch-watchdog", "/var/lib/watchdog")
    config = tmp_path / "config.toml"  # state_dir left at its default
    config.write_text(f'[daemon]\nlisten = "127.0.0.1:0"\n\n[launches.a]\nlog = "{tmp_path}/a.log"\n')
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    result = subprocess.run(
        [unshare, "--mount", sys.executable, str(driver), str(TESTS), str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["old"][0] == 0, out["old"]
    code, _, err = out["refused"]
    assert code == 78
    assert err.startswith(
        "watchdog: configuration error: /var/lib/llm-launch-watchdog: daemon.state_dir: no state file here, "
        "but /var/lib/watchdog/watchdog.sqlite3 holds the state of watchdog before the rename"
    ), err
    for command in (
        "silence_refused",
        "history_refused",
    ):  # neither makes a new state that would hide the old
        assert out[command][0] == 78, out[command]
        assert (
            "/var/lib/watchdog/watchdog.sqlite3 holds the state of watchdog before the rename"
            in out[command][2]
        )
    assert out["made_there"] == []
    assert out["moved"] == 0
    assert out["silences"][0] == 0
    assert out["silences"][1].startswith("kimi-ep"), out["silences"]
    assert out["started"] is True
