"""cryptography 51 deprecates DSA and asyncssh names DSA key types at import: reaching SSH must not print that
warning (watchdog/follow/sources/asyncssh_quiet.py). Where the cryptography installed is older (the pinned one),
the import is quiet either way; CI's run at the dependency floors installs the newest, where it is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_ssh_modules_warns_nothing() -> None:
    """Every module of ours that imports asyncssh, imported first in a fresh interpreter with every warning an
    error: none is raised (the DSA deprecation included), and nothing is printed."""
    modules = [
        "watchdog.follow.sources.ssherrors",
        "watchdog.follow.sources.hostkeys",
        "watchdog.follow.sources.channel",
        "watchdog.follow.sources.sshpool",
        "watchdog.follow.sources.ssh",
        "watchdog.follow.probes.health",
    ]
    for module in modules:
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", f"import {module}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), module
