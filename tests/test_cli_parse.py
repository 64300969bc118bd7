"""`watchdog replay ...` is parsed without the other commands' parsers, to the same namespace and messages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from watchdog.cli import app

_REPLAYS = [
    ["replay", "x.log"],
    ["replay", "--json", "x.log", "--engine", "vllm", "--profile", "a.toml", "--profile", "b.toml"],
    ["replay", "a.log", "b.log", "--compare-with", "c.log", "--debug"],
    ["replay", "--example"],
    ["replay", "--", "-odd.log"],
    ["replay"],
]


@pytest.mark.parametrize("argv", _REPLAYS)
def test_a_replay_is_parsed_alone_to_the_same_namespace(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay's arguments give build_parser()'s namespace, and the parser of every command is not built."""
    expected = app.build_parser().parse_args(argv)
    monkeypatch.setattr(app, "build_parser", lambda: pytest.fail("the whole parser was built"))
    assert app.parse_arguments(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [["replay", "--bogus", "x.log"], ["replay", "x.log", "--engine"], ["replay", "x.log", "--compare-with"]],
)
def test_a_replays_usage_error_is_said_by_the_whole_parser(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A usage error of a replay prints what the parser of every command prints (a top-level usage names
    every command), once, and exits 64."""
    with pytest.raises(SystemExit) as whole:
        app.build_parser().parse_args(argv)
    expected = capsys.readouterr()
    with pytest.raises(SystemExit) as alone:
        app.parse_arguments(argv)
    assert (alone.value.code, capsys.readouterr()) == (whole.value.code, expected)
    assert whole.value.code == 64


@pytest.mark.parametrize(
    "argv",
    [["replay", "--help"], ["replay", "x.log", "--he"], ["--debug", "replay", "x.log"], ["-h"], ["history"]],
)
def test_other_command_lines_are_parsed_as_before(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Help and the other forms give what build_parser() gives (exit and output alike, at the terminal's width)."""
    monkeypatch.setenv("COLUMNS", "47")
    try:
        expected = ("ok", app.build_parser().parse_args(argv))
    except SystemExit as exc:
        expected = ("exit", exc.code)
    out = capsys.readouterr()
    try:
        got = ("ok", app.parse_arguments(argv))
    except SystemExit as exc:
        got = ("exit", exc.code)
    assert (got, capsys.readouterr()) == (expected, out)


def test_a_replays_parse_asks_no_terminal_width() -> None:
    """Parsing a replay's command line imports no shutil (a formatter's terminal width: bz2 and lzma with it)."""
    code = (
        "import sys\nfrom watchdog.cli.app import parse_arguments\n"
        "parse_arguments(['replay', 'x.log', '--json'])\nprint('shutil' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False\n"
