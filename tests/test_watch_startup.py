"""What `watch` and `replay` load on their way to a verdict: the time to a crash verdict is mostly start-up.

A local log's follower logs nothing through structlog and draws no live view under `--json`, so neither
structlog (which loads rich when it is installed) nor rich is imported; engine detection reads every engine's
`detect` markers but compiles only the rules of the engine it finds. Each is a tenth of a second or more of
`watchdog watch FILE --json` on a complete log (../shared/tools/live-vs-replay's crash-verdict time).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from watchdog.core.detection import detect_engine
from watchdog.profiles import loader

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "captured-vllm-bad-dtype-cpu.log"


def _run(*argv: str) -> tuple[int, list[str], str]:
    code = (
        "import json, sys\n"
        "argv = json.loads(sys.argv[1])\n"
        "sys.argv = ['watchdog', *argv]\n"
        "from watchdog.cli.app import main\n"
        "rc = main(argv)\n"  # as a caller's: the program's own replay ends in the call, before this report
        "sys.stdout.flush()\n"
        "loaded = sorted(m for m in ('structlog', 'rich', 'asyncssh') if m in sys.modules)\n"
        "print(json.dumps({'rc': rc, 'loaded': loaded}), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return report["rc"], report["loaded"], proc.stdout


@pytest.mark.parametrize("command", ["watch", "replay"])
def test_a_local_logs_verdict_loads_neither_structlog_nor_rich(command: str) -> None:
    argv = [command, str(CRASH), "--json"] + (["--timeout", "20"] if command == "watch" else [])
    rc, loaded, out = _run(*argv)
    assert rc == 1
    assert json.loads(out)["state"] == "crashed"
    assert loaded == []


def test_engine_detection_compiles_no_rules() -> None:
    """Detection reads every engine's markers and compiles no engine's rules: only the engine found needs them."""
    loader._draft.cache_clear()
    loader._bundled.cache_clear()
    known = loader.catalogue()
    assert detect_engine(CRASH.read_text().splitlines(), known) == "vllm"
    assert not any(draft.compiled for _, draft in (*known.bundled, ("common", known.common)))


_IMPORTS_WHILE_FOLLOWING = """
import sys

from watchdog.cli.app import main
from watchdog.follow.follower import LaunchFollower

run = LaunchFollower.run


async def run_and_log(self, **kwargs):
    assert "structlog" not in sys.modules
    import structlog  # a part that logs, imported while the follower runs: configured as it is imported
    import importlib.resources, inspect

    assert inspect.getsource(structlog)  # its loader's other methods are still there
    assert importlib.resources.files("structlog").joinpath("__init__.py").is_file()

    structlog.get_logger("watchdog.follow").info("SSH connection made again", host="gpu1")
    structlog.get_logger("watchdog.follow").warning("checkpoint not saved", error="disk full")
    return await run(self, **kwargs)


LaunchFollower.run = run_and_log
sys.exit(main(["watch", "--json", sys.argv[1]]))
"""


def test_structlog_imported_while_following_is_configured_as_it_is_imported(tmp_path: Path) -> None:
    """Saving structlog's import never costs the contract: whatever logs still goes to standard error
    (warnings and up), never into the JSON on standard output."""
    script = tmp_path / "watch_imports.py"
    script.write_text(_IMPORTS_WHILE_FOLLOWING)
    done = subprocess.run(
        [sys.executable, str(script), str(CRASH)], capture_output=True, text=True, timeout=120, check=False
    )
    assert json.loads(done.stdout)["state"] == "crashed"  # the whole of standard output is the verdict
    assert "checkpoint not saved" in done.stderr
    assert "connection made again" not in done.stderr + done.stdout
