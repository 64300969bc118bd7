"""benchmarks/loop_trace.py: a callback that holds the loop is recorded with its CPU time, and so is a collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TRACER = Path(__file__).resolve().parents[1] / "benchmarks" / "loop_trace.py"
SCRIPT = """
import asyncio, gc, time

def busy():
    end = time.thread_time() + 0.05
    while time.thread_time() < end:
        pass
    gc.collect()

async def main():
    asyncio.get_running_loop().call_soon(busy)
    await asyncio.sleep(0.01)

asyncio.run(main())
"""


def test_a_busy_callback_and_a_full_collection_are_recorded(tmp_path: Path) -> None:
    """A callback that computes 50 ms is kept with its CPU time (and the full collection inside it, counted in
    it); `--show` prints it."""
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    out = tmp_path / "trace"
    env = {**os.environ, "LOOP_TRACE": str(out)}
    subprocess.run([sys.executable, str(TRACER), str(script)], check=True, env=env, timeout=60)
    data = json.loads((out / "trace.json").read_text())
    slow = [s for s in data["slow"] if "busy" in s[3]]
    assert len(slow) == 1
    assert slow[0][1] >= 50.0  # ms of CPU
    assert slow[0][2] > 0.0  # of which in the collection
    assert any(p[1] == 2 and p[4] > 0 for p in data["pauses"])  # the full collection, with its objects
    shown = subprocess.run(
        [sys.executable, str(TRACER), "--show", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "busy" in shown
