"""Parse nvidia-smi CSV queries into GPU samples and tell whether GPU memory is still filling."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

# Facts as published in the `--json` "facts" object: fact name -> GPU index (as a JSON key) -> bytes.
GpuFacts = dict[str, dict[str, int]]

MIB = 1024 * 1024
"""nvidia-smi reports memory in MiB under `nounits`."""

QUERY_GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
)
QUERY_GPU_ARGS: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=" + ",".join(QUERY_GPU_FIELDS),
    "--format=csv,noheader,nounits",
)
"""The exact command line whose output `parse_gpu_query` reads."""

QUERY_APPS_ARGS: tuple[str, ...] = (
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,used_memory",
    "--format=csv,noheader,nounits",
)
"""The exact command line whose output `parse_compute_apps` reads."""

DEFAULT_GROWTH_THRESHOLD_BYTES = 256 * MIB
DEFAULT_GROWTH_WINDOW_SECONDS = 60.0

# Trailing numeric columns of a --query-gpu row: memory.used .. power.draw.
_GPU_NUMERIC_TAIL = 5


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU as one `--query-gpu` row reported it; None where nvidia-smi had no value."""

    index: int
    uuid: str
    name: str
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    utilization_pct: float | None
    temperature_c: float | None
    power_w: float | None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One compute process as one `--query-compute-apps` row reported it."""

    pid: int
    name: str
    used_bytes: int | None


def _number(field: str) -> float | None:
    """A finite number, or None for "[N/A]", "[Not Supported]", blanks and anything else."""
    try:
        value = float(field)  # float() ignores surrounding whitespace
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _mib_to_bytes(field: str) -> int | None:
    value = _number(field)
    return None if value is None or value < 0 else round(value * MIB)


def _int(field: str) -> int | None:
    try:
        return int(field)  # int() ignores surrounding whitespace
    except ValueError:
        return None


def _rows(text: str) -> Iterable[list[str]]:
    """Split rows on commas, unstripped, so a name holding a comma can be joined back exactly."""
    for line in text.splitlines():
        if line.strip():
            yield line.split(",")


def parse_gpu_query(text: str) -> list[GpuSample]:
    """Parse the output of `QUERY_GPU_ARGS`: one sample per GPU row, in order. Other rows (driver errors such
    as "No devices were found", truncated rows) are skipped: a probe must never crash the watcher."""
    samples: list[GpuSample] = []
    for fields in _rows(text):
        if len(fields) < len(QUERY_GPU_FIELDS):
            continue
        index = _int(fields[0])
        if index is None or index < 0:
            continue
        # A name holding a comma spreads over several fields; the numeric tail is fixed.
        tail = fields[-_GPU_NUMERIC_TAIL:]
        samples.append(
            GpuSample(
                index=index,
                uuid=fields[1].strip(),
                name=",".join(fields[2:-_GPU_NUMERIC_TAIL]).strip(),
                memory_used_bytes=_mib_to_bytes(tail[0]),
                memory_total_bytes=_mib_to_bytes(tail[1]),
                utilization_pct=_number(tail[2]),
                temperature_c=_number(tail[3]),
                power_w=_number(tail[4]),
            )
        )
    return samples


def parse_compute_apps(text: str) -> list[GpuProcess]:
    """Parse the output of `QUERY_APPS_ARGS`: one entry per process, in order, `used_bytes` None for "[N/A]"
    (often so in containers); rows without a numeric pid are skipped."""
    processes: list[GpuProcess] = []
    for fields in _rows(text):
        if len(fields) < 3:
            continue
        pid = _int(fields[0])
        if pid is None or pid <= 0:
            continue
        # A process path may hold commas: the pid leads and the memory closes the row.
        processes.append(
            GpuProcess(pid=pid, name=",".join(fields[1:-1]).strip(), used_bytes=_mib_to_bytes(fields[-1]))
        )
    return processes


class MemoryTrend:
    """Whether GPU memory is still filling (pure: time is an argument): a quiet phase that keeps allocating is
    busy, not stalled. Growing: the latest total rose by more than `threshold_bytes` over its lowest within
    `window_seconds`, compared over the same GPUs only (a garbled row is no drop followed by growth)."""

    def __init__(
        self,
        *,
        threshold_bytes: int = DEFAULT_GROWTH_THRESHOLD_BYTES,
        window_seconds: float = DEFAULT_GROWTH_WINDOW_SECONDS,
    ) -> None:
        if threshold_bytes < 0:
            raise ValueError(f"threshold_bytes must be >= 0, got {threshold_bytes}")
        if window_seconds <= 0:
            raise ValueError(f"window_seconds must be > 0, got {window_seconds}")
        self.threshold_bytes = threshold_bytes
        self.window_seconds = window_seconds
        self._history: deque[tuple[float, dict[int, int]]] = deque()
        self._latest: tuple[GpuSample, ...] = ()

    def observe(self, now: float, samples: Iterable[GpuSample]) -> bool:
        """Record one probe's samples taken at `now` (none: nothing), and return `growing(now)`. A clock that
        went backwards restarts the history: its points no longer fit in the window."""
        batch = tuple(samples)
        used = {s.index: s.memory_used_bytes for s in batch if s.memory_used_bytes is not None}
        if batch:
            self._latest = batch
        if used:
            if self._history and now < self._history[-1][0]:
                self._history.clear()
            self._history.append((now, used))
        return self.growing(now)

    def growing(self, now: float) -> bool:
        """Whether used memory rose by more than the threshold within the window ending at `now`."""
        self._expire(now)
        if len(self._history) < 2:
            return False
        latest = self._history[-1][1]
        latest_total = sum(latest.values())
        lowest = latest_total
        for _, used in self._history:
            if latest.keys() <= used.keys():
                lowest = min(lowest, sum(used[index] for index in latest))
        return latest_total - lowest > self.threshold_bytes

    def facts(self) -> GpuFacts:
        """The latest memory per GPU as `--json` facts: `{"gpu_mem_used_bytes": {"0": ...}, ...}`; a value
        not reported is left out, and before any sample it is empty."""
        if not self._latest:
            return {}
        return {
            "gpu_mem_used_bytes": {
                str(s.index): s.memory_used_bytes for s in self._latest if s.memory_used_bytes is not None
            },
            "gpu_mem_total_bytes": {
                str(s.index): s.memory_total_bytes for s in self._latest if s.memory_total_bytes is not None
            },
        }

    def _expire(self, now: float) -> None:
        horizon = now - self.window_seconds
        while self._history and self._history[0][0] < horizon:
            self._history.popleft()
