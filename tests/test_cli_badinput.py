"""Bad command-line input: a clear message and exit 64 (usage) or 78 (profile), never a traceback or exit 1."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from snapshots import status_from_json

import watchdog.follow.replay
from watchdog.alerts.delivery import post_json
from watchdog.cli.app import main
from watchdog.cli.options import duration
from watchdog.exceptions import DeliveryError
from watchdog.vocabulary import PID_MAX_LIMIT

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
READY = str(CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log")
# `--timeout 30` on every watch: a case that wrongly gets past validation fails instead of hanging.
WATCH = ["watch", READY, "--timeout", "30"]
COMMAND = [sys.executable, "-m", "watchdog.cli"]
DEADLINE = 20  # seconds a subprocess may take before the test fails as a hang
IS_ROOT = os.geteuid() == 0


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the command line in-process; return the exit code (argparse's too), stdout and stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


def _subprocess(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the installed command line in a child; fail the test if it does not return in DEADLINE s."""
    try:
        return subprocess.run(
            [*COMMAND, *argv], capture_output=True, text=True, check=False, timeout=DEADLINE
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`watchdog {' '.join(argv)}` hung for {DEADLINE} s")


def _assert_clean(out: str, err: str) -> None:
    assert "Traceback" not in out
    assert "Traceback" not in err


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO that nobody writes to: a plain open() for reading blocks on it forever."""
    path = tmp_path / "server.log"
    os.mkfifo(path)
    yield path
    path.unlink()


def _refused_port() -> int:
    """A local TCP port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        pytest.param(["--notify", "http://127.0.0.1:99999/"], "invalid port", id="notify-port-too-big"),
        pytest.param(["--notify", "http://127.0.0.1:0/hook"], "invalid port", id="notify-port-0"),
        pytest.param(["--notify", "http://127.0.0.1:abc/hook"], "invalid port", id="notify-port-text"),
        pytest.param(["--notify", "notaurl"], "not an http(s) URL", id="notify-not-a-url"),
        pytest.param(["--notify", "ftp://example.com/x"], "unsupported scheme 'ftp'", id="notify-ftp"),
        pytest.param(["--notify", "http:///hook"], "has no host", id="notify-no-host"),
        pytest.param(["--notify", "http://[::1/hook"], "invalid URL", id="notify-bad-ipv6"),
        pytest.param(["--notify", "http://exa mple.com/x"], "spaces", id="notify-space"),
        pytest.param(["--health", "notaurl"], "not an http(s) URL", id="health-not-a-url"),
        pytest.param(["--health", "http://127.0.0.1:70000/health"], "invalid port", id="health-port"),
        pytest.param(["--health", "http:///health"], "has no host", id="health-no-host"),
        pytest.param(["--timeout", "nan"], "not a duration", id="timeout-nan"),
        pytest.param(["--timeout", "inf"], "not a duration", id="timeout-inf"),
        pytest.param(["--timeout", "1e400"], "not a duration", id="timeout-overflows-to-inf"),
        pytest.param(["--timeout", "-1"], "not a duration", id="timeout-negative"),
        pytest.param(["--timeout", "0"], "not a duration", id="timeout-zero"),
        pytest.param(["--timeout", "10x"], "not a duration", id="timeout-bad-unit"),
        pytest.param(["--stall-after", "nan"], "not a duration", id="stall-after-nan"),
        pytest.param(["--stall-after", "infm"], "not a duration", id="stall-after-inf-minutes"),
        pytest.param(["--gpu-interval", "nan"], "not a duration", id="gpu-interval-nan"),
        pytest.param(["--gpu-interval=-5s"], "not a duration", id="gpu-interval-negative"),
        pytest.param(["--pid", "0"], "not a valid process id", id="pid-zero"),
        pytest.param(["--pid", "-1"], "not a valid process id", id="pid-negative"),
        pytest.param(["--pid", str(PID_MAX_LIMIT)], "not a valid process id", id="pid-at-pid-max-limit"),
        pytest.param(["--pid", str(2**63)], "not a valid process id", id="pid-huge"),
        pytest.param(["--pid", "12ab"], "not a process id", id="pid-not-a-number"),
        pytest.param(["--process", ""], "pattern is empty", id="process-empty"),
        pytest.param(["--process", "a\nb"], "must be one line", id="process-two-lines"),
        pytest.param(["--pid", "5", "--process", "sglang"], "exclusive", id="pid-and-process"),
    ],
)
def test_bad_watch_option_value_is_usage_error(
    argv: list[str], phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed `watch` option value exits 64 with a message saying what is wrong, before watching."""
    code, out, err = _run([*WATCH, *argv], capsys)
    assert code == 64, err
    assert phrase in err
    assert out == ""  # refused before anything started: no verdict
    _assert_clean(out, err)


def test_unknown_watch_engine_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An engine no bundled profile and no --profile file names exits 78, saying what is allowed, before watching."""
    code, out, err = _run([*WATCH, "--engine", "nope"], capsys)
    assert code == 78, err
    assert "unknown engine 'nope'" in err
    assert out == ""
    _assert_clean(out, err)


def test_notify_error_does_not_show_the_webhook_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """A refused --notify URL is named by scheme://host:port only: its path and user info carry secrets."""
    code, _out, err = _run([*WATCH, "--notify", "https://bot:pw@hooks.example.com:99999/T0/B0/XYZ"], capsys)
    assert code == 64
    assert "https://hooks.example.com:99999 has an invalid port" in err
    for secret in ("XYZ", "T0", "bot", "pw"):
        assert secret not in err


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "0", "-1", "", "s", "1.5w", "1h30", "ten"])
def test_duration_rejects_what_is_not_a_positive_finite_duration(text: str) -> None:
    """The duration parser refuses NaN, infinities, 0, negatives and unknown units, saying what is allowed."""
    with pytest.raises(argparse.ArgumentTypeError, match=r"not a duration: give a positive duration.*1h30m"):
        duration(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90", 90.0, id="bare"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("10m", 600.0, id="minutes"),
        pytest.param("1.5h", 5400.0, id="hours"),
        pytest.param(" 0.25 ", 0.25, id="fraction-with-spaces"),
        pytest.param("1h30m", 5400.0, id="the-config-file-s-compound-form"),
        pytest.param("1.5d", 129600.0, id="days"),
    ],
)
def test_duration_accepts_seconds_minutes_hours(text: str, seconds: float) -> None:
    """The duration parser reads 90, 90s, 10m and 1.5h as seconds, and what the config file takes (1h30m, 2d)."""
    assert duration(text) == seconds


@pytest.mark.parametrize(
    ("option", "make", "phrase"),
    [
        pytest.param("--events", lambda d: d / "missing" / "x.jsonl", "does not exist", id="events-no-dir"),
        pytest.param("--events", lambda d: d, "a directory", id="events-is-directory"),
        pytest.param("--identity", lambda d: d / "nope", "no such file", id="identity-missing"),
        pytest.param("--identity", lambda d: d, "a directory, not an SSH private key", id="identity-dir"),
        pytest.param("--known-hosts", lambda d: d / "nope", "no such file", id="known-hosts-missing"),
        pytest.param("--known-hosts", lambda d: d, "a directory, not a known_hosts", id="known-hosts-dir"),
        pytest.param("--profile", lambda d: d / "nope.toml", "no such file", id="profile-missing"),
        pytest.param("--profile", lambda d: d, "a directory, not a profile", id="profile-dir"),
    ],
)
def test_bad_file_option_is_usage_error(
    option: str,
    make: Callable[[Path], Path],
    phrase: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file option naming something missing or a directory exits 64 with the option and the path."""
    path = make(tmp_path)
    code, out, err = _run([*WATCH, option, str(path)], capsys)
    assert code == 64, err
    assert f"{option} {path}" in err
    assert phrase in err
    _assert_clean(out, err)


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs sysfs, where no file can be created")
def test_events_where_no_file_can_be_created_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """--events in a directory where creating a file fails (sysfs, even for root) exits 64 at once."""
    code, out, err = _run([*WATCH, "--events", "/sys/watchdog-events.jsonl"], capsys)
    assert code == 64, err
    assert "--events /sys/watchdog-events.jsonl: cannot create" in err
    _assert_clean(out, err)
    assert not Path("/sys/watchdog-events.jsonl").exists()


@pytest.mark.skipif(IS_ROOT, reason="root ignores file permissions")
@pytest.mark.parametrize(
    ("option", "phrase"),
    [
        pytest.param("--events", "cannot write", id="events"),
        pytest.param("--identity", "cannot read", id="identity"),
        pytest.param("--known-hosts", "cannot read", id="known-hosts"),
        pytest.param("--profile", "cannot read", id="profile"),
    ],
)
def test_file_without_permission_is_usage_error(
    option: str, phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file option naming a file that this user may not read (or write, for --events) exits 64."""
    path = tmp_path / "locked"
    path.write_text("")
    path.chmod(0)
    code, out, err = _run([*WATCH, option, str(path)], capsys)
    assert code == 64, err
    assert f"{option} {path}: {phrase}: Permission denied" in err
    _assert_clean(out, err)


def test_events_file_is_not_left_behind_by_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checking that --events can be created does not leave the file when another option is refused."""
    events = tmp_path / "events.jsonl"
    code, _out, err = _run([*WATCH, "--events", str(events), "--identity", str(tmp_path / "nope")], capsys)
    assert code == 64
    assert "--identity" in err
    assert not events.exists()


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        pytest.param(b'name = "generic"\n# \xff\xfe latin-1 caf\xe9\n', "not UTF-8 text", id="not-utf8"),
        pytest.param(b"name = [\n", "invalid TOML", id="invalid-toml"),
        pytest.param(
            b'extends = "sglang"\n[[phase]]\nmatch = "step 3"\n', "may not contain digits", id="bad-rule"
        ),
        pytest.param(b'extends = "sglang"\n[[bogus]]\nmatch = "x"\n', "unknown table", id="unknown-table"),
    ],
)
@pytest.mark.parametrize("command", ["watch", "replay"])
def test_bad_profile_content_is_config_error(
    command: str, content: bytes, phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --profile file that is not UTF-8, not TOML or not a valid profile exits 78 naming the file."""
    profile = tmp_path / "mine.toml"
    profile.write_bytes(content)
    argv = [*WATCH] if command == "watch" else ["replay", READY]
    code, out, err = _run([*argv, "--profile", str(profile)], capsys)
    assert code == 78, err
    assert f"configuration error: {profile}" in err
    assert phrase in err
    assert out == ""
    _assert_clean(out, err)


@pytest.mark.parametrize("command", ["watch", "replay"])
def test_fifo_is_refused_at_once(command: str, fifo: Path) -> None:
    """A FIFO as the log (watch TARGET or replay FILE) exits 64 at once instead of blocking in open()."""
    argv = ["watch", str(fifo), "--timeout", "30"] if command == "watch" else ["replay", str(fifo)]
    proc = _subprocess(argv)
    assert proc.returncode == 64, proc.stderr
    assert f"{fifo}: a FIFO, not a regular log file" in proc.stderr
    _assert_clean(proc.stdout, proc.stderr)


def test_fifo_appearing_after_the_start_is_refused_by_the_follower(tmp_path: Path) -> None:
    """A FIFO the local follower meets (not checked at start: it appeared later) is refused, not opened."""
    path = tmp_path / "later.log"
    os.mkfifo(path)
    code = (
        "import sys, anyio\n"
        "from watchdog.follow.sources.local import LocalSource\n"
        "async def follow():\n"
        "    async with LocalSource(sys.argv[1]).open_follow() as items:\n"
        "        async for _ in items: pass\n"
        "try:\n"
        "    anyio.run(follow)\n"
        "except BaseException as exc:\n"
        "    while isinstance(exc, BaseExceptionGroup): exc = exc.exceptions[0]\n"
        "    print(type(exc).__name__, exc)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=DEADLINE,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"following a FIFO hung for {DEADLINE} s")
    assert proc.stdout.strip() == f"UsageError cannot follow {path}: a FIFO, not a regular log file"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        pytest.param("/dev/zero", "a character device", id="dev-zero"),
        pytest.param("/dev/null", "a character device", id="dev-null"),
        pytest.param(str(CORPUS), "a directory", id="directory"),
    ],
)
@pytest.mark.parametrize("command", ["watch", "replay"])
def test_device_or_directory_is_refused(
    command: str, path: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A character device or a directory as the log exits 64 instead of reading forever or failing later."""
    argv = ["watch", path, "--timeout", "30"] if command == "watch" else ["replay", path]
    code, out, err = _run(argv, capsys)
    assert code == 64, err
    verb = "follow" if command == "watch" else "replay"
    assert f"cannot {verb} {path}: {kind}, not a regular log file" in err
    _assert_clean(out, err)


def test_missing_target_in_missing_directory_warns_and_waits(tmp_path: Path) -> None:
    """A target in a directory that does not exist is a warning, not an error: it waits until --timeout."""
    target = tmp_path / "not-yet" / "server.log"
    proc = _subprocess(["watch", str(target), "--timeout", "0.5"])
    assert proc.returncode == 2, proc.stderr
    assert f"warning: directory {target.parent} does not exist (yet)" in proc.stderr
    _assert_clean(proc.stdout, proc.stderr)


def test_missing_target_in_existing_directory_waits_silently(tmp_path: Path) -> None:
    """A target not created yet in an existing directory gives no warning: the launch may not have begun."""
    proc = _subprocess(["watch", str(tmp_path / "server.log"), "--timeout", "0.5"])
    assert proc.returncode == 2, proc.stderr
    assert "warning" not in proc.stderr
    _assert_clean(proc.stdout, proc.stderr)


def test_failed_notification_keeps_the_verdict() -> None:
    """A webhook that refuses the connection leaves the ready verdict and exit 0, with one line on stderr."""
    proc = _subprocess([*WATCH, "--notify", f"http://127.0.0.1:{_refused_port()}/hook"])
    assert proc.returncode == 0, proc.stderr
    assert "ready" in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("watchdog: notification failed: cannot reach webhook http://127.0.0.1:")
    _assert_clean(proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    ("url", "phrase"),
    [
        pytest.param("http://127.0.0.1:99999/x", "invalid URL", id="port-too-big"),
        pytest.param("http://127.0.0.1:0/x", "invalid port 0", id="port-zero"),
        pytest.param("http://127.0.0.1:abc/x", "invalid URL", id="port-not-a-number"),
        pytest.param("http:///x", "only http:// and https://", id="no-host"),
        pytest.param("http://host.invalid/x", "cannot reach webhook|did not answer", id="dns-failure"),
        pytest.param("REFUSED", "cannot reach webhook", id="connection-refused"),
    ],
)
def test_notify_failures_are_delivery_errors(url: str, phrase: str) -> None:
    """Every way a delivery can fail (bad URL, DNS, refused) raises DeliveryError, never something else."""
    if url == "REFUSED":
        url = f"https://127.0.0.1:{_refused_port()}/x"

    async def deliver() -> None:
        await post_json(url, {"state": "ready"}, attempts=1, backoff=0, timeout=5)

    with pytest.raises(DeliveryError, match=phrase):
        anyio.run(deliver)


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        pytest.param(["replay"], "needs a log FILE or --example", id="neither"),
        pytest.param(["replay", READY, "--example"], "needs a log FILE or --example", id="both"),
    ],
)
def test_replay_needs_exactly_one_of_file_and_example(
    argv: list[str], phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay` without FILE and --example, or with both, is a usage error (64)."""
    code, out, err = _run(argv, capsys)
    assert code == 64
    assert phrase in err
    _assert_clean(out, err)


@pytest.mark.parametrize(
    ("exc", "named"),
    [
        pytest.param(RuntimeError("boom\n  second line"), "RuntimeError: boom second line", id="multi-line"),
        pytest.param(
            ExceptionGroup("unhandled errors in a TaskGroup", [ValueError("inner")]),
            "ValueError: inner",
            id="task-group",
        ),
    ],
)
def test_internal_error_is_exit_70_in_one_line(
    exc: Exception, named: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug inside watchdog exits 70 (not 1, "crashed") with one stderr line naming it and --debug."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(watchdog.follow.replay, "replay_path", broken)
    code, out, err = _run(["replay", READY], capsys)
    assert code == 70
    assert err.splitlines() == [f"watchdog: internal error: {named} (run with --debug for the traceback)"]
    _assert_clean(out, err)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--debug", "replay", READY], id="before-the-command"),
        pytest.param(["replay", READY, "--debug"], id="after-the-command"),
    ],
)
def test_debug_shows_the_internal_error_traceback(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --debug, an internal error prints the full traceback, then the one-line summary; still 70."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(watchdog.follow.replay, "replay_path", broken)
    code, _out, err = _run(argv, capsys)
    assert code == 70
    assert err.startswith("Traceback (most recent call last):")
    assert "in broken" in err
    assert err.splitlines()[-1] == "watchdog: internal error: RuntimeError: boom"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--help"], id="top"),
        pytest.param(["watch", "--help"], id="watch"),
    ],
)
def test_help_lists_the_exit_codes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """--help of the program and of `watch` ends with the whole table of exit codes (each other command's, with
    its own: `test_each_command_lists_exactly_the_exit_codes_it_can_give`)."""
    code, out, _err = _run(argv, capsys)
    assert code == 0
    table = out[out.index("exit codes:") :]
    for line in ("0   ready", "1   crashed", "2   stalled", "3   no verdict", "64  usage error"):
        assert line in table
    for line in (
        "69  target unreachable",
        "70  internal error",
        "78  configuration error",
        "130 interrupted",
    ):
        assert line in table


def test_the_distribution_named_command_says_its_own_name_with_its_version() -> None:
    """`llm-launch-watchdog --version` prints `llm-launch-watchdog VERSION` (it printed `watchdog VERSION`)."""
    import shutil  # noqa: PLC0415

    from watchdog.vocabulary import version  # noqa: PLC0415

    script = shutil.which("llm-launch-watchdog", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed with the package"
    out = subprocess.run([script, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"llm-launch-watchdog {version()}"


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        pytest.param(["watch"], {0, 1, 2, 3, 64, 69, 70, 78, 130}, id="watch"),
        pytest.param(["replay"], {0, 1, 3, 64, 70, 78, 130}, id="replay"),
        pytest.param(["run"], {0, 64, 70, 78, 130}, id="run"),
        pytest.param(["check-config"], {0, 64, 69, 78}, id="check-config"),
        pytest.param(["history"], {0, 64, 70, 78}, id="history"),
        pytest.param(["silence"], {0, 64, 70, 78}, id="silence"),
    ],
)
def test_each_command_lists_exactly_the_exit_codes_it_can_give(
    command: list[str], codes: set[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--help` of each command ends with the exit codes that command can give, and no other (replay
    listed 2 and 69, which it never gives; run, check-config, history and silence listed none)."""
    import re  # noqa: PLC0415

    from watchdog.cli.app import main  # noqa: PLC0415

    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    listed = text[text.index("exit codes:") :]
    assert {int(n) for n in re.findall(r"^  (\d+) ", listed, re.MULTILINE)} == codes


def test_history_reads_the_state_dir_of_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`watchdog history --config FILE` reads the config's state_dir (it took only --state-dir); a config that
    is not valid is exit 78."""
    import anyio  # noqa: PLC0415

    from watchdog.cli.app import main  # noqa: PLC0415
    from watchdog.store import open_store  # noqa: PLC0415

    async def keep() -> None:
        async with open_store(tmp_path / "state") as store:
            await store.record_transition(
                "kimi",
                1,
                status_from_json({"state": "ready", "phase": "ready", "timeline": [], "labels": {}}),
            )

    anyio.run(keep)
    config = tmp_path / "watchdog.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n')
    assert main(["history", "--config", str(config), "--json"]) == 0
    assert [r["launch"] for r in json.loads(capsys.readouterr().out)] == ["kimi"]
    config.write_text("[daemon]\nstate_dir = 3\n")
    assert main(["history", "--config", str(config)]) == 78
