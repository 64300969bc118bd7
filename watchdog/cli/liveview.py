"""The live view of `watchdog watch` on a terminal, and the plain progress line, from a `Status` snapshot.

`LiveView` is a rich renderable: each `Live.refresh()` reads `status()` and `clock()` again, so the time in
the phase ticks with no event. With rich's own refresh thread, lines printed above the view from another
thread must hold the Live's lock (a redraw between rich's cursor move and its write leaves pieces behind);
else call `live.refresh()` every 1/8 s from the thread that prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from watchdog.core.facts import glance, number
from watchdog.core.verdict import Status
from watchdog.vocabulary import SETTLED_STATES, STARTUP_PHASES, State, format_duration

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

__all__ = ["LiveView", "ProgressLines", "where"]

_TICKING = frozenset(s for s in State if s not in SETTLED_STATES)  # states whose time keeps running
_STYLE = {
    State.READY: "bold green",
    State.CRASHED: "bold red",
    State.STALLED: "bold magenta",
    State.STOPPED: "blue",
}
_BAR_WIDTH = 30


class LiveView:
    """What a person watching a launch sees: phases with their time, progress with ETA, memory, last line.
    `status()` and `clock()` (the snapshot's clock) are called on each redraw; rich's Live serialises the
    redraws (its lock), which keeps `_rates` safe."""

    def __init__(self, target: str, status: Callable[[], Status], clock: Callable[[], float]) -> None:
        self.target = target
        self.status = status
        self.clock = clock
        self._rates: dict[str, _Rate] = {}  # progress name -> what the view saw of it
        self._incarnation: object = None
        self._last: Status | None = None  # the last snapshot status() gave

    def __rich__(self) -> RenderableType:
        """The current picture, from a fresh snapshot (rich calls this on every refresh)."""
        try:
            status = self.status()
        except RuntimeError:
            # A snapshot taken on rich's refresh thread while the event loop changed a dict under it. Raising
            # would end that thread, and the view would freeze for good: show the last one, try again next time.
            if self._last is None:
                raise
            status = self._last
        else:
            self._last = status
        return self.render(status, self.clock())

    def render(self, status: Status, now: float) -> RenderableType:
        """The picture of `status` at clock time `now`."""
        # rich is imported where the view is drawn: the plain progress line (and `watch --json`) never loads it
        from rich.console import Group  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        v = status.verdict
        if v.incarnation != self._incarnation:  # a restart: its progress starts over
            self._incarnation = v.incarnation
            self._rates.clear()
        head = Text.assemble(
            (self.target, "bold"),
            "  ",
            (v.engine or "detecting engine", "cyan"),
            "  ",
            (v.state.value, _STYLE.get(v.state, "yellow")),
        )
        if status.elapsed is not None:
            head.append(f"  {format_duration(status.elapsed)} elapsed", style="dim")
        if v.incarnations > 1:
            head.append(f"  (launch #{v.incarnation} of {v.incarnations})", style="dim")
        parts: list[RenderableType] = [head]
        missing = v.missing_log
        if missing is not None and missing.path:  # no log, so no launch: the file is the news, not a stall
            waited = f" (waited {format_duration(missing.seconds)})" if missing.seconds is not None else ""
            said = f"no log: {missing.path} does not exist{waited}"
            parts.append(Text(said, style="bold yellow" if missing.overdue else "yellow"))
        elif v.timeline:
            parts.append(self._phases(status, now))
        if v.progress:
            parts.append(self._bars(status, now))
        for node in v.nodes:  # a multi-node launch: where each node is
            nv = node.verdict
            line = Text.assemble(
                (f"  {node.name}{' (serves)' if node.serve else ''}", "bold"),
                " ",
                (nv.state.value, _STYLE.get(nv.state, "yellow")),
                f" in {nv.phase.value}" if nv.phase is not nv.state else "",
                "  " + ", ".join(f"{p.name} {p.done}/{p.total}" for p in nv.progress),
            )
            if nv.error is not None:
                line.append(f"  {nv.error.summary}", style="red")
            line.no_wrap, line.overflow = True, "ellipsis"
            parts.append(line)
        facts = memory_facts(dict(v.facts))
        if facts:
            parts.append(Text("  ".join(facts), style="dim"))
        if status.last_line:
            parts.append(Text(status.last_line, style="italic", no_wrap=True, overflow="ellipsis"))
        return Group(*parts)

    def _phases(self, status: Status, now: float) -> Table:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        table = Table.grid(padding=(0, 2))
        timeline = status.verdict.timeline
        for i, (item, seconds) in enumerate(zip(timeline, status.verdict.durations(now), strict=True)):
            current = i == len(timeline) - 1
            table.add_row(
                Text("▸" if current else " ", style="bold"),
                Text(item.state.value, style="bold" if current else ""),
                Text(format_duration(seconds) if seconds is not None else "", justify="right"),
                Text(item.at or "", style="dim"),
            )
        return table

    def _bars(self, status: Status, now: float) -> Table:
        from rich.progress_bar import ProgressBar  # noqa: PLC0415
        from rich.table import Table  # noqa: PLC0415

        table = Table.grid(padding=(0, 2))
        for p in status.verdict.progress:
            done, total = p.done, p.total
            rate = self._rates.get(p.name)
            if rate is None or done < rate.last_done:
                rate = self._rates[p.name] = _Rate(now, done, now, done)
            elif done > rate.last_done:
                rate.last_at, rate.last_done = now, done
            left = rate.eta(total, now)
            eta = "done" if done >= total > 0 else "" if left is None else f"ETA {format_duration(left)}"
            table.add_row(
                p.name,
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


def memory_facts(facts: Mapping[str, object]) -> list[str]:
    """The memory facts worth a glance (`watchdog.core.facts.GLANCE`), as short phrases, then the memory
    used per GPU."""
    out = glance(facts)
    gpus = facts.get("gpu_mem_used_bytes")
    if isinstance(gpus, Mapping):
        for index, used in sorted(gpus.items(), key=lambda kv: _gpu_order(kv[0])):
            if number(used) is not None:
                out.append(f"gpu{index} {used / 2**30:.1f} GiB")
    return out


def where(status: Status, now: float) -> str:
    """One line saying where the launch is, e.g. `loading_weights for 2m13s, weights 12/64, 5m40s since start`."""
    v = status.verdict
    head = v.state.value
    if v.state is State.STALLED:
        head = f"stalled in {v.phase.value}"
    elif v.state is State.CRASHED:
        head = f"crashed during {v.phase.value}"
    elif v.state is State.PENDING and v.missing_log is not None and v.missing_log.path:
        head = f"pending: {v.missing_log.path} does not exist (yet)"
    elif v.state is State.PENDING and not v.timeline:
        head = "pending (no launch in the log yet)"
    parts = [head]
    durations = v.durations(now)
    if durations and durations[-1] is not None and v.state in _TICKING:
        parts[0] += f" for {format_duration(durations[-1])}"
    parts.extend(f"{p.name} {p.done}/{p.total}" for p in v.progress if p.done < p.total)
    if status.elapsed is not None:
        parts.append(f"{format_duration(status.elapsed)} since start")
    return ", ".join(parts)


class ProgressLines:
    """For plain output: a `where` line at most once per `interval` seconds of silence while starting (pure).
    The caller prints what `line` returns on its ticks, and calls `touch` when it printed something else."""

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._last: float | None = None  # when something was last printed (or the first call)

    def touch(self, now: float) -> None:
        """Something was printed at `now`."""
        self._last = now

    def line(self, status: Status, now: float) -> str | None:
        """The progress line to print now, or None."""
        if self._last is None:
            self._last = now
            return None
        if status.state not in STARTUP_PHASES or now - self._last < self.interval:
            return None
        self._last = now
        return where(status, now)


def _gpu_order(index: object) -> tuple[int, str]:
    text = str(index)
    return (int(text), text) if text.isdigit() else (1 << 30, text)
