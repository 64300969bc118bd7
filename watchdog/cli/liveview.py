"""The live view of `watchdog watch` on a terminal, and the plain progress line, both from a status snapshot.

The snapshot is the verdict object of `watchdog.core.verdict.to_json` plus what the follower adds:
`elapsed_seconds` (clock seconds since the follow began), `entered` (parallel to `timeline`: the clock time
each entry happened, on the same clock as the view's `clock()`) and `last_line` (the last relevant log line).

`LiveView` is a rich renderable (`__rich__`): every `Live.refresh()` calls `status()` and `clock()` again, so
the time in the current phase ticks with no event and no `Live.update()`. Either let rich's thread refresh
(`Live(view, auto_refresh=True, refresh_per_second=8)`: then `status()` runs on that thread, and lines printed
above the view from another thread must hold the Live's lock, or a redraw can slip between rich's cursor
positioning and its write and leave pieces of the view behind), or call `live.refresh()` every 1/8 s from
the thread that also prints (`auto_refresh=False`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from watchdog.vocabulary import SETTLED_STATES, STARTUP_PHASES, State, format_duration

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

__all__ = ["STARTUP_STATES", "LiveView", "ProgressLines", "where"]

STARTUP_STATES = frozenset(s.value for s in STARTUP_PHASES)
_TICKING = frozenset(s.value for s in State if s not in SETTLED_STATES)  # states whose time runs
_STYLE = {
    State.READY.value: "bold green",
    State.CRASHED.value: "bold red",
    State.STALLED.value: "bold magenta",
    State.STOPPED.value: "blue",
}
_FACTS = (  # fact key -> how the view names it
    ("avail_mem_before_weights_gb", "free before weights {:g} GB"),
    ("avail_mem_after_weights_gb", "free after weights {:g} GB"),
    ("kv_cache_tokens", "KV cache {:,.0f} tokens"),
    ("kv_cache_memory_gb", "KV cache {:g} GB"),
    ("graph_mem_gb", "graphs {:g} GB"),
    ("weights_mem_gb", "weights {:g} GB"),
)
_BAR_WIDTH = 30


class LiveView:
    """What a person watching a launch sees: phases with their time, progress with ETA, memory, last line.

    `status()` returns the current snapshot; `clock()` the current time on the snapshot's `entered` clock.
    Both are called on each redraw; rich's Live serialises the redraws (its lock), which keeps `_rates` safe.
    """

    def __init__(self, target: str, status: Callable[[], dict[str, Any]], clock: Callable[[], float]) -> None:
        self.target = target
        self.status = status
        self.clock = clock
        self._rates: dict[str, _Rate] = {}  # progress name -> what the view saw of it
        self._incarnation: object = None
        self._last: dict[str, Any] = {}  # the last snapshot status() gave

    def __rich__(self) -> RenderableType:
        """The current picture, from a fresh snapshot (rich calls this on every refresh)."""
        try:
            status = self.status()
        except RuntimeError:
            # A snapshot taken on rich's refresh thread while the event loop changed a dict under it. Raising
            # would end that thread, and the view would freeze for good: show the last one, try again next time.
            status = self._last
        else:
            self._last = status
        return self.render(status, self.clock())

    def render(self, status: Mapping[str, Any], now: float) -> RenderableType:
        """The picture of `status` at clock time `now`."""
        # rich is imported where the view is drawn: the plain progress line (and `watch --json`) never loads it
        from rich.console import Group  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        if status.get("incarnation") != self._incarnation:  # a restart: its progress starts over
            self._incarnation = status.get("incarnation")
            self._rates.clear()
        state = str(status.get("state") or "pending")
        head = Text.assemble(
            (self.target, "bold"),
            "  ",
            (status.get("engine") or "detecting engine", "cyan"),
            "  ",
            (state, _STYLE.get(state, "yellow")),
        )
        elapsed = status.get("elapsed_seconds")
        if _is_number(elapsed):
            head.append(f"  {format_duration(elapsed)} elapsed", style="dim")
        if status.get("incarnations", 1) > 1:
            head.append(f"  (launch #{status.get('incarnation')} of {status['incarnations']})", style="dim")
        parts: list[RenderableType] = [head]
        missing = status.get("missing_log") or {}
        if missing.get("path"):  # no log, so no launch: the file is the news, not a phase that stalled
            waited = missing.get("seconds")
            waited_text = f" (waited {format_duration(waited)})" if _is_number(waited) else ""
            said = f"no log: {missing['path']} does not exist{waited_text}"
            parts.append(Text(said, style="bold yellow" if missing.get("overdue") else "yellow"))
        elif status.get("timeline"):
            parts.append(self._phases(status, now))
        if status.get("progress"):
            parts.append(self._bars(status, now))
        facts = memory_facts(status.get("facts") or {})
        if facts:
            parts.append(Text("  ".join(facts), style="dim"))
        last = status.get("last_line")
        if last:
            parts.append(Text(str(last), style="italic", no_wrap=True, overflow="ellipsis"))
        return Group(*parts)

    def _phases(self, status: Mapping[str, Any], now: float) -> Table:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        table = Table.grid(padding=(0, 2))
        timeline = status.get("timeline") or []
        durations = phase_durations(status, now)
        for i, (item, seconds) in enumerate(zip(timeline, durations, strict=True)):
            current = i == len(timeline) - 1
            table.add_row(
                Text("▸" if current else " ", style="bold"),
                Text(str(item.get("state")), style="bold" if current else ""),
                Text(format_duration(seconds) if seconds is not None else "", justify="right"),
                Text(item.get("at") or "", style="dim"),
            )
        return table

    def _bars(self, status: Mapping[str, Any], now: float) -> Table:
        from rich.progress_bar import ProgressBar  # noqa: PLC0415
        from rich.table import Table  # noqa: PLC0415

        table = Table.grid(padding=(0, 2))
        for name, p in (status.get("progress") or {}).items():
            done, total = int(p.get("done", 0)), int(p.get("total", 0))
            rate = self._rates.get(name)
            if rate is None or done < rate.last_done:
                rate = self._rates[name] = _Rate(now, done, now, done)
            elif done > rate.last_done:
                rate.last_at, rate.last_done = now, done
            eta = ""
            if done >= total > 0:
                eta = "done"
            else:
                left = rate.eta(total, now)
                if left is not None:
                    eta = f"ETA {format_duration(left)}"
            table.add_row(
                name,
                ProgressBar(total=max(total, 1), completed=min(done, max(total, 1)), width=_BAR_WIDTH),
                f"{done}/{total}",
                eta,
            )
        return table


class _Rate:
    """The first and the latest change of one progress counter, as the view saw them (clock times)."""

    __slots__ = ("first_at", "first_done", "last_at", "last_done")

    def __init__(self, first_at: float, first_done: int, last_at: float, last_done: int) -> None:
        self.first_at, self.first_done = first_at, first_done
        self.last_at, self.last_done = last_at, last_done

    def eta(self, total: int, now: float) -> float | None:
        """Seconds left at the observed rate, counted down since the latest step; None before two steps
        and once the countdown ran out (the next step is late: no estimate is better than a wrong one)."""
        steps, seconds = self.last_done - self.first_done, self.last_at - self.first_at
        if steps <= 0 or seconds <= 0:
            return None
        left = (total - self.last_done) * seconds / steps - (now - self.last_at)
        return left if left >= 0 else None


def phase_durations(status: Mapping[str, Any], now: float) -> list[float | None]:
    """Seconds spent in each timeline entry: the next entry's clock time minus this one's; the last runs
    to `now` while the launch is starting (or stalled), an outcome (ready, crashed) has none. Without clock
    times, the log's own `duration_seconds`."""
    timeline = status.get("timeline") or []
    entered = status.get("entered") or []
    out: list[float | None] = []
    for i, item in enumerate(timeline):
        start = entered[i] if i < len(entered) else None
        if i + 1 < len(timeline):
            end = entered[i + 1] if i + 1 < len(entered) else None
        else:
            end = now if item.get("state") in _TICKING else None
        if start is not None and end is not None:
            out.append(max(0.0, end - start))
        else:
            out.append(item.get("duration_seconds"))
    return out


def memory_facts(facts: Mapping[str, Any]) -> list[str]:
    """The memory facts worth a glance, as short phrases, then the memory used per GPU."""
    out = [label.format(facts[key]) for key, label in _FACTS if _is_number(facts.get(key))]
    gpus = facts.get("gpu_mem_used_bytes")
    if isinstance(gpus, Mapping):
        for index, used in sorted(gpus.items(), key=lambda kv: _gpu_order(kv[0])):
            if _is_number(used):
                out.append(f"gpu{index} {used / 2**30:.1f} GiB")
    return out


def where(status: Mapping[str, Any], now: float) -> str:
    """One line saying where the launch is, e.g. `loading_weights for 2m13s, weights 12/64, 5m40s since start`."""
    state = str(status.get("state") or "pending")
    timeline = status.get("timeline") or []
    head = state
    if state == "stalled" and status.get("phase"):
        head = f"stalled in {status['phase']}"
    elif state == "crashed" and status.get("phase"):
        head = f"crashed during {status['phase']}"
    elif state == "pending" and (status.get("missing_log") or {}).get("path"):
        head = f"pending: {status['missing_log']['path']} does not exist (yet)"
    elif state == "pending" and not timeline:
        head = "pending (no launch in the log yet)"
    parts = [head]
    durations = phase_durations(status, now)
    if durations and durations[-1] is not None and state in _TICKING:
        parts[0] += f" for {format_duration(durations[-1])}"
    for name, p in (status.get("progress") or {}).items():
        done, total = p.get("done", 0), p.get("total", 0)
        if done < total:
            parts.append(f"{name} {done}/{total}")
    elapsed = status.get("elapsed_seconds")
    if _is_number(elapsed):
        parts.append(f"{format_duration(elapsed)} since start")
    return ", ".join(parts)


class ProgressLines:
    """For plain output: a `where` line at most once per `interval` seconds of silence while starting.

    The caller calls `line(status, now)` on its clock ticks and prints what it returns, and calls
    `touch(now)` whenever it printed something else (a transition line): that restarts the silence.
    Pure: time is an argument.
    """

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._last: float | None = None  # when something was last printed (or the first call)

    def touch(self, now: float) -> None:
        """Something was printed at `now`."""
        self._last = now

    def line(self, status: Mapping[str, Any], now: float) -> str | None:
        """The progress line to print now, or None."""
        if self._last is None:
            self._last = now
            return None
        if status.get("state") not in STARTUP_STATES or now - self._last < self.interval:
            return None
        self._last = now
        return where(status, now)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _gpu_order(index: object) -> tuple[int, str]:
    text = str(index)
    return (int(text), text) if text.isdigit() else (1 << 30, text)
