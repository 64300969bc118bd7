"""Packaging: the import package `watchdog` is shared with the PyPI file-events library of the same name.

Both install into `site-packages/watchdog/`, so no module of ours may have the name of one of theirs, and no
module of ours may rely on `watchdog/__init__.py` (theirs may be the one on disk, or none: see
test_coexistence.py for the real installs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import resources
from importlib.metadata import distribution
from pathlib import Path

import watchdog.cli.app

PACKAGE = Path(watchdog.cli.app.__file__).parent.parent
REPO = PACKAGE.parent
# What the file-events `watchdog` (7.x) ships in the shared directory, besides `__init__.py` and `py.typed`.
THEIRS = {"__main__.py", "events.py", "version.py", "watchmedo.py", "observers", "tricks", "utils"}
SHARED_OK = {"__init__.py", "py.typed"}


def _our_python_files() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    return files + sorted((REPO / "benchmarks").glob("*.py"))


def test_no_module_has_the_name_of_one_of_theirs() -> None:
    """No file or subpackage of ours (a `__main__.py` included) would overwrite or be overwritten by theirs."""
    ours = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert not (ours & THEIRS), "these would overwrite the file-events package's modules"
    assert ours - THEIRS - SHARED_OK  # the listing is of the right directory


def test_no_module_relies_on_the_package_init() -> None:
    """Our modules and benchmarks import `from watchdog.<module> import ...`, never names of `watchdog/__init__.py`."""
    offenders = []
    for path in _our_python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "watchdog" and node.level == 0:
                offenders.append(f"{path}:{node.lineno}: from watchdog import ...")
            if isinstance(node, ast.Import) and any(alias.name == "watchdog" for alias in node.names):
                offenders.append(f"{path}:{node.lineno}: import watchdog")
    assert offenders == []


def test_init_reexports_lazily() -> None:
    """When our `__init__.py` is the one on disk, its re-exports resolve on use and importing it loads no module of ours."""
    code = (
        "import sys, watchdog; loaded = sorted(m for m in sys.modules if m.startswith('watchdog.')); "
        "print(loaded); from watchdog import Analyzer, replay_path; print(Analyzer.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "watchdog.core.analyzer"]


def test_profiles_ship_inside_the_package() -> None:
    """The engine profiles are package data of `watchdog.profiles`, found without `watchdog.__file__`."""
    assert resources.files("watchdog.profiles").joinpath("sglang.toml").is_file()


def test_distribution_name_is_not_watchdog() -> None:
    """The installed distribution is llm-launch-watchdog and declares the `watchdog` console script."""
    dist = distribution("llm-launch-watchdog")
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts["watchdog"] == "watchdog.cli:main"


def test_module_entry_point_is_watchdog_cli() -> None:
    """`python -m watchdog.cli` is the command line (`python -m watchdog` belongs to the other package)."""
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("watchdog ")


def test_version_does_not_import_the_analyzer() -> None:
    """`watchdog --version` prints the version without loading the heavy modules (fast start)."""
    code = (
        "import sys; from watchdog.cli.app import main; rc = main(['--version']); "
        "print('analyzer' if 'watchdog.core.analyzer' in sys.modules else 'lean', 'asyncssh' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("watchdog ")
    assert out.splitlines()[1] == "lean False"
