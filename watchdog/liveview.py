"""The live view of `watchdog watch` on a terminal: phase, time per phase, progress bars with ETA, facts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from watchdog.render import format_duration

if TYPE_CHECKING:
    from watchdog.analyzer import Analyzer

__all__ = ["LiveView"]

_SHOWN_FACTS = (
    "avail_mem_after_weights_gb",
    "kv_cache_tokens",
    "kv_cache_memory_gb",
    "graph_mem_gb",
    "weights_mem_gb",
)


class LiveView:
    """Renders an analyzer's current incarnation; `now` is the watch's clock (seconds since it started)."""

    def __init__(self, analyzer: Analyzer, target: str) -> None:
        self.analyzer = analyzer
        self.target = target
        self.gpu_memory: dict[str, int] = {}  # GPU index -> bytes used, from the GPU probe
        self._rates: dict[str, tuple[float, int]] = {}  # progress name -> (first time seen, done then)
        self._entered: dict[int, float] = {}  # timeline index -> clock time the view saw it

    def render(self, now: float) -> RenderableType:
        """The current picture."""
        inc = self.analyzer.lifecycle.current
        head = Text.assemble(
            (self.target, "bold"),
            "  ",
            (self.analyzer.engine or "detecting engine", "cyan"),
            "  ",
            (inc.state.value, _STYLE.get(inc.state.value, "yellow")),
        )
        phases = Table.grid(padding=(0, 2))
        for i, (t, _) in enumerate(inc.timeline):
            start = self._entered.setdefault(i, now)
            end = self._entered.get(i + 1, now) if i + 1 < len(inc.timeline) else now
            phases.add_row(t.state.value, format_duration(max(0.0, end - start)), t.at or "")
        bars = Table.grid(padding=(0, 2))
        for name, (done, total) in inc.progress.items():
            first = self._rates.setdefault(name, (now, done))
            eta = ""
            if done > first[1] and now > first[0] and done < total:
                rate = (done - first[1]) / (now - first[0])
                eta = f"ETA {format_duration((total - done) / rate)}"
            bars.add_row(
                name, ProgressBar(total=max(total, 1), completed=done, width=30), f"{done}/{total}", eta
            )
        facts = [f"{k}={inc.facts[k]:g}" for k in _SHOWN_FACTS if isinstance(inc.facts.get(k), float)]
        facts += [f"gpu{i} {used / 2**30:.1f} GiB" for i, used in sorted(self.gpu_memory.items())]
        parts: list[RenderableType] = [head, phases, bars]
        if facts:
            parts.append(Text("  ".join(facts), style="dim"))
        if self.analyzer.last_relevant:
            parts.append(Text(self.analyzer.last_relevant[:200], style="italic"))
        return Group(*parts)


_STYLE = {"ready": "bold green", "crashed": "bold red", "stalled": "bold magenta", "stopped": "blue"}
