"""`print-unit`, `print-config`, `print-forced-command`: the files a host installs, as the wheel ships them.

They are package data (`watchdog/data/`, force-included from `systemd/` and `deploy/`), so that a pipx install
alone is a whole install; a source checkout reads its own. The unit's ExecStart names this install's script.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from watchdog.cli.render import write_out
from watchdog.exceptions import UsageError

# the console script the unit runs (never `watchdog`: Debian's /usr/sbin/watchdog)
SCRIPT = "llm-launch-watchdog"
TEMPLATE_EXEC = "/usr/local/bin/llm-launch-watchdog"  # the unit's ExecStart program as written in the repo
_EXEC_START = re.compile(r"^ExecStart=(\S+)( .*)?$", re.MULTILINE)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
_HOMES = (Path("/root"), Path("/home"), Path("/run/user"))  # ProtectHome=: and private to their users anyway


@dataclass(frozen=True)
class ShippedFile:
    """One file a host installs: its name in the wheel (`watchdog/data/NAME`) and its path in the repository."""

    name: str
    repo_path: str


UNIT = ShippedFile("llm-launch-watchdog.service", "systemd/llm-launch-watchdog.service")
CONFIG = ShippedFile("config.example.toml", "deploy/config.example.toml")
FORCED_COMMAND = ShippedFile(
    "llm-launch-watchdog-forced-command", "deploy/ssh/llm-launch-watchdog-forced-command"
)
SHIPPED = (UNIT, CONFIG, FORCED_COMMAND)  # pyproject.toml's [tool.hatch.build.targets.wheel.force-include]


def shipped_text(file: ShippedFile) -> str:
    """The text of a shipped file: the wheel's package data, else (a source checkout) the repository's file;
    UsageError when neither is there (an install made without the package data)."""
    data = resources.files("watchdog") / "data" / file.name
    if data.is_file():
        return data.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parent.parent.parent
    source = checkout / file.repo_path
    if (checkout / "pyproject.toml").is_file() and source.is_file():
        return source.read_text(encoding="utf-8")
    raise UsageError(f"this install has no {file.name} (watchdog/data/ is missing): reinstall the wheel")


def _scripts_dir() -> str:
    import sysconfig  # noqa: PLC0415 - not for the other commands' start (`watchdog replay`)

    return sysconfig.get_path("scripts")


def find_script(argv0: str | None = None) -> Path | None:
    """This install's `llm-launch-watchdog` script, as an absolute path (a symlink on PATH kept as it is):
    beside the program that runs (a venv's, pipx's or uv's script), in this interpreter's scripts directory
    (`python -m watchdog.cli`), then on PATH."""
    program = sys.argv[0] if argv0 is None else argv0
    candidates: list[Path] = []
    if program and os.sep in program:
        here = Path(os.path.abspath(program))
        candidates += [here if here.name == SCRIPT else here.with_name(SCRIPT)]
        candidates.append(Path(os.path.realpath(here)).with_name(SCRIPT))
    candidates.append(Path(_scripts_dir()) / SCRIPT)
    candidates.append(Path(os.path.abspath(sys.executable)).with_name(SCRIPT))
    on_path = shutil.which(SCRIPT)
    if on_path is not None:
        candidates.append(Path(os.path.abspath(on_path)))
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _unit_word(path: str) -> str:
    """`path` as the program of a unit's command line: `%` escaped (a specifier), quoted when it has characters
    other than the plain ones. (`$` stays: systemd expands variables in the arguments, not in the program.)"""
    if "\n" in path or "\r" in path:
        raise UsageError(f"--exec: {path!r}: a path with a line break cannot be written in a unit")
    text = path.replace("%", "%%")
    if _PLAIN_WORD.fullmatch(path):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(exec_path: str) -> str:
    """The shipped unit with its ExecStart program replaced by `exec_path` (an absolute path)."""
    text = shipped_text(UNIT)
    starts = _EXEC_START.findall(text)
    if len(starts) != 1 or starts[0][0] != TEMPLATE_EXEC:
        raise UsageError(f"{UNIT.name}: expected one ExecStart={TEMPLATE_EXEC} ..., found {starts}")
    return _EXEC_START.sub(lambda m: f"ExecStart={_unit_word(exec_path)}{m.group(2) or ''}", text)


def add_print_unit_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `watchdog print-unit`, for the command line's subparser."""
    parser.add_argument(
        "--exec",
        dest="exec_path",
        metavar="PATH",
        help=f"the program the unit runs (default: this install's {SCRIPT} script, found beside this "
        "program, in its interpreter's scripts directory or on PATH); an absolute path",
    )
    parser.set_defaults(handler=run_print_unit)


def private_home(paths: list[str]) -> str | None:
    """The first of `paths` (symlinks resolved) inside a home directory, which the unit's user cannot enter."""
    for path in paths:
        real = Path(os.path.realpath(path))
        if any(real.is_relative_to(home) for home in _HOMES):
            return str(real)
    return None


def run_print_unit(args: argparse.Namespace) -> int:
    """`watchdog print-unit [--exec PATH]`: the systemd unit, its ExecStart this install's script; 0 or 64.
    Warns (exit 0) when the program or the interpreter is in a home directory the service cannot enter."""
    if args.exec_path is not None:
        exec_path = args.exec_path
        if not os.path.isabs(exec_path):
            raise UsageError(f"--exec: {exec_path!r} is not an absolute path (systemd needs one)")
        if not os.access(exec_path, os.X_OK):
            print(f"watchdog: warning: --exec: {exec_path} is not an executable file here", file=sys.stderr)
        looked = [exec_path]
    else:
        found = find_script()
        if found is None:
            raise UsageError(
                f"cannot find this install's {SCRIPT} script (not beside {sys.argv[0]}, not in "
                f"{_scripts_dir()}, not on PATH): give its path with --exec PATH"
            )
        exec_path = str(found)
        looked = [exec_path, sys.executable]
    home = private_home(looked)
    if home is not None:
        print(
            f"watchdog: warning: {home} is in a home directory, which the unit's user llm-launch-watchdog "
            "cannot enter: the service would not start. Install under /opt (docs/operations.md, step 1).",
            file=sys.stderr,
        )
    write_out(unit_text(exec_path).rstrip("\n"))
    return 0


def run_print_config(_args: argparse.Namespace) -> int:
    """`watchdog print-config`: the complete, commented example config; 0."""
    write_out(shipped_text(CONFIG).rstrip("\n"))
    return 0


def run_print_forced_command(_args: argparse.Namespace) -> int:
    """`watchdog print-forced-command`: the SSH forced-command wrapper of this release, for the GPU hosts; 0."""
    write_out(shipped_text(FORCED_COMMAND).rstrip("\n"))
    return 0
