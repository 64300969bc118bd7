"""Coexistence with the PyPI package `watchdog` (file events), which installs into the same directory.

Both distributions put their modules in `site-packages/watchdog/`: whichever is installed last owns the
shared `__init__.py`, and uninstalling either removes it (then `watchdog` is a namespace package). These
tests build our wheel, fetch theirs from the package index once per session, and install both into fresh
virtual environments in both orders. Without network access to the index they skip with the reason, unless
`WATCHDOG_REQUIRE_SSHD=1` (as in CI, see conftest.py), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import unavailable as _unavailable

REPO = Path(__file__).resolve().parents[1]
OURS = "llm-launch-watchdog"
THEIRS = "watchdog>=7"
THEIRS_NAME = "watchdog"
# A corpus case our replay must get right in every layout: crashed in graph capture, out of memory.
CASE = Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "oom-capture-cuda-graph-deepep-issue5285"
EXIT_BY_OUTCOME = {"ready": 0, "crashed": 1, "incomplete": 3}
PIP_TIMEOUT = 300
RUN_TIMEOUT = 60

# pip builds and installs wheels: minutes on a loaded machine, past the suite's 60 s per test
pytestmark = pytest.mark.timeout(PIP_TIMEOUT * 2)

# Their file-events API, exercised for real: a file created in a directory is reported to a handler.
# The observer's watch is in place when start() returns; the wait has a deadline and no sleep.
OBSERVE = """
import sys, threading
from pathlib import Path
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

target = Path(sys.argv[1]) / "created.txt"
seen = threading.Event()

class Handler(FileSystemEventHandler):
    def on_created(self, event):
        if Path(event.src_path) == target:
            seen.set()

observer = Observer()
observer.schedule(Handler(), str(target.parent))
observer.start()
try:
    target.write_text("x")
    ok = seen.wait(timeout=20)
finally:
    observer.stop()
    observer.join(20)
print("observed" if ok else "not observed")
sys.exit(0 if ok else 1)
"""


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _run(cmd: list[str], cwd: Path, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run outside the repository (so the working tree is not importable), without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH"}}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no files beside the installed ones: uninstall removes them all
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of wheels (theirs from the index, ours built from the working tree, our dependencies), made
    once per session, from which every virtual environment installs with --no-index."""
    path = tmp_path_factory.mktemp("wheelhouse")
    cwd = tmp_path_factory.mktemp("pip-cwd")
    pip = [sys.executable, "-m", "pip"]
    theirs = _run(
        [*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(path), THEIRS],
        cwd,
        PIP_TIMEOUT,
    )
    if theirs.returncode != 0:
        _unavailable(f"cannot download {THEIRS!r} from the package index: {_tail(theirs.stderr)}")
    # The index answered: from here on a failure is ours, not the network's.
    built = _run([*pip, "wheel", "-q", "--no-deps", "-w", str(path), str(REPO)], cwd, PIP_TIMEOUT)
    assert built.returncode == 0, f"pip wheel of the working tree failed: {built.stderr}"
    (ours,) = path.glob("llm_launch_watchdog-*.whl")
    deps = _run([*pip, "wheel", "-q", "-w", str(path), str(ours)], cwd, PIP_TIMEOUT)
    assert deps.returncode == 0, f"cannot fetch our dependencies as wheels: {deps.stderr}"
    return path


class Venv:
    """A fresh virtual environment (no pip inside: the test's pip drives it with --python)."""

    def __init__(self, root: Path, wheelhouse: Path) -> None:
        self.root = root
        self.wheelhouse = wheelhouse
        self.work = root.parent / f"{root.name}-cwd"
        self.work.mkdir()
        created = _run([sys.executable, "-m", "venv", "--without-pip", str(root)], self.work)
        assert created.returncode == 0, created.stderr
        self.python = root / "bin" / "python"
        (site_packages,) = root.glob("lib/python*/site-packages")
        self.package_dir = site_packages / "watchdog"  # shared by both distributions

    def pip(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "pip", "--python", str(self.python), *args]
        proc = _run(cmd, self.work, PIP_TIMEOUT)
        assert proc.returncode == 0, f"{' '.join(args)}: {proc.stderr}"

    def install(self, which: str) -> None:
        name = OURS if which == "ours" else THEIRS_NAME
        self.pip("install", "-q", "--no-index", "--find-links", str(self.wheelhouse), name)

    def uninstall(self, which: str) -> None:
        self.pip("uninstall", "-q", "-y", OURS if which == "ours" else THEIRS_NAME)

    def run(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.root / "bin" / cmd[0]), *cmd[1:]], self.work)

    def assert_ours_works(self) -> None:
        label = json.loads(CASE.with_suffix(".json").read_text())
        proc = self.run("watchdog", "replay", str(CASE.with_suffix(".log")), "--json")
        assert proc.returncode == EXIT_BY_OUTCOME[label["outcome"]], proc.stderr
        verdict = json.loads(proc.stdout)
        assert (verdict["state"], verdict["phase"]) == (label["outcome"], label["phase"])
        assert verdict["error"]["category"] == label["category"]
        assert label["root_cause"] in verdict["error"]["summary"]
        module = self.run("python", "-m", "watchdog.cli", "--version")
        assert module.returncode == 0, module.stderr
        assert module.stdout.startswith("watchdog "), module.stdout

    def assert_theirs_works(self) -> None:
        watched = Path(tempfile.mkdtemp(dir=self.work))  # a new directory: the file does not exist yet
        observed = self.run("python", "-c", OBSERVE, str(watched))
        assert (observed.returncode, observed.stdout.strip()) == (0, "observed"), observed.stderr
        for cmd in (("watchmedo", "--help"), ("python", "-m", "watchdog", "--help")):
            proc = self.run(*cmd)
            assert proc.returncode == 0, f"{cmd}: {proc.stderr}"
            assert "auto-restart" in proc.stdout, f"{cmd} is not watchmedo: {proc.stdout}"


ORDERS = [
    pytest.param(("ours", "theirs"), id="ours-then-theirs"),
    pytest.param(("theirs", "ours"), id="theirs-then-ours"),
]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(
    "removed", [pytest.param("ours", id="uninstall-ours"), pytest.param("theirs", id="uninstall-theirs")]
)
def test_both_work_in_either_order_and_the_other_survives_an_uninstall(
    wheelhouse: Path, tmp_path: Path, order: tuple[str, str], removed: str
) -> None:
    """Installed in this order both packages work (`python -m watchdog` is theirs), and after uninstalling one the other still works."""
    venv = Venv(tmp_path / "venv", wheelhouse)
    for which in order:
        venv.install(which)
    assert (venv.package_dir / "__init__.py").is_file()
    venv.assert_ours_works()
    venv.assert_theirs_works()

    venv.uninstall(removed)
    # The shared __init__.py went with it: what is left is a namespace package and must work as one.
    assert not (venv.package_dir / "__init__.py").exists()
    if removed == "ours":
        venv.assert_theirs_works()
        assert not (venv.package_dir / "cli.py").exists()
    else:
        venv.assert_ours_works()
        assert not (venv.package_dir / "observers").exists()
