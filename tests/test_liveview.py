"""The live view: phase, time per phase, progress bars with ETA, memory facts, the last relevant line."""

from __future__ import annotations

import io

from rich.console import Console

from watchdog.analyzer import Analyzer
from watchdog.liveview import LiveView

LINES = [
    "[2025-01-23 19:35:14 TP0] Init torch distributed begin.",
    "[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.08it/s]",
]


def _text(view: LiveView, now: float) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(view.render(now))
    return console.export_text()


def test_render_shows_phase_progress_eta_and_facts() -> None:
    """After two shard steps 10 s apart, the view shows the phase, 2/4 with an ETA, and the memory fact."""
    analyzer = Analyzer("sglang")
    view = LiveView(analyzer, "gpu1:/logs/server.log")
    analyzer.feed(("\n".join(LINES) + "\n").encode(), 0.0)
    _text(view, 0.0)
    analyzer.feed(
        b"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.75it/s]\n", 10.0
    )
    view.gpu_memory = {"0": 40 * 2**30}
    text = _text(view, 10.0)
    assert "gpu1:/logs/server.log" in text
    assert "sglang" in text
    assert "loading_weights" in text
    assert "2/4" in text
    assert "ETA 20s" in text
    assert "gpu0 40.0 GiB" in text
    assert "Loading safetensors checkpoint shards:  50% Completed | 2/4" in text
