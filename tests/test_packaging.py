"""Packaging: `import watchdog` is this project, not the PyPI file-events library of the same import name."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import watchdog


def test_import_is_this_package() -> None:
    """The imported `watchdog` is ours: it has the analyzer and its profiles ship inside it."""
    assert hasattr(watchdog, "Analyzer")
    assert hasattr(watchdog, "replay_path")
    assert (Path(watchdog.__file__).parent / "profiles" / "sglang.toml").is_file()


def test_distribution_name_is_not_watchdog() -> None:
    """The installed distribution is llm-launch-watchdog and declares the `watchdog` console script."""
    dist = distribution("llm-launch-watchdog")
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts["watchdog"] == "watchdog.cli:main"


def test_version_does_not_import_the_analyzer() -> None:
    """`watchdog --version` prints the version without loading the heavy modules (fast start)."""
    code = (
        "import sys; from watchdog.cli import main; rc = main(['--version']); "
        "print('analyzer' if 'watchdog.analyzer' in sys.modules else 'lean', 'asyncssh' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("watchdog ")
    assert out.splitlines()[1] == "lean False"
