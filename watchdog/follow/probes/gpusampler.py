"""One GPU sampler per host: GPU memory attributed to each launch's processes, so launches never mask each other.

Once per interval, one script on the host reads `nvidia-smi --query-compute-apps`, `ps` and `pgrep -f` for
each pattern (on stdin); a launch is charged with the memory of its pid or matches and all their
descendants (engines rename their GPU workers), or with every GPU process when it names neither. A host-wide
subscriber (`watch --gpu`) gets `nvidia-smi --query-gpu` per GPU instead. Subscribers pull: the first one
due takes the reading for all, so one command runs per interval whatever the number of launches.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from watchdog.clock import Clock, MonotonicClock
from watchdog.exceptions import ConnectionLost
from watchdog.follow.probes.nvidia import (
    QUERY_APPS_ARGS,
    QUERY_GPU_ARGS,
    GpuProcess,
    GpuSample,
    MemoryTrend,
    parse_compute_apps,
    parse_gpu_query,
)
from watchdog.vocabulary import DEFAULT_GPU_INTERVAL, check_pattern

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool

T = TypeVar("T")
_TIMEOUT = 10.0  # seconds one reading may take on the host
_MARK = "@@watchdog-gpu"  # starts the section lines of the script's output (no CSV row or number does)

# One reading. The patterns come on stdin, one a line, so that no process carries them on its command line
# (it would match its own pattern); `$$` lets the parser leave out this shell and its ancestors.
_SCRIPT = f"""\
echo "{_MARK} self $$"
apps=$({shlex.join(QUERY_APPS_ARGS)} </dev/null 2>/dev/null)
echo "{_MARK} smi $?"
printf '%s\\n' "$apps"
echo "{_MARK} ps"
ps -e -o pid=,ppid= </dev/null
while IFS= read -r p; do
  echo "{_MARK} pgrep"
  pgrep -f -- "$p"
done
"""
_COMMAND = ("sh", "-c", _SCRIPT, "watchdog-gpu")
_NOT_FOUND = 127  # the shell's status for a command not found: a host without NVIDIA tools


@dataclass(frozen=True, slots=True)
class HostReading:
    """One reading of a host, as the sampler's script printed it."""

    apps: tuple[GpuProcess, ...] | None  # None: nvidia-smi failed (no driver, no device)
    parents: Mapping[int, int]  # pid -> parent pid, every process on the host
    matches: Mapping[str, frozenset[int]]  # pattern -> pids pgrep found (this reading's own shell left out)
    missing: bool = False  # nvidia-smi is not installed
    gpus: tuple[GpuSample, ...] | None = None  # per GPU, for host-wide subscribers (None: not read or failed)


@dataclass(frozen=True, slots=True)
class LaunchGpuSample:
    """One launch's share of its host's GPU memory at one reading."""

    used_bytes: int | None  # over all GPUs (0: none); None: not reported per process (often in containers)
    pids: frozenset[int]  # the launch's processes found on the host: the pid or matches, and descendants
    processes: tuple[GpuProcess, ...]  # the GPU processes charged to the launch


def parse_ps(text: str) -> dict[int, int]:
    """Parse `ps -e -o pid=,ppid=` into pid -> parent pid; lines that are not two numbers are skipped."""
    parents: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            parents[int(fields[0])] = int(fields[1])
    return parents


def _ancestors(pid: int, parents: Mapping[int, int]) -> set[int]:
    found = {pid}
    while (pid := parents.get(pid, 0)) > 0 and pid not in found:
        found.add(pid)
    return found


def launch_pids(roots: Iterable[int], parents: Mapping[int, int]) -> frozenset[int]:
    """The roots and all their descendants, by the parent table of `parse_ps`."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found = set(roots)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return frozenset(found)


def parse_reading(text: str, patterns: Iterable[str]) -> HostReading:
    """Parse the sampler script's output; `patterns` in the order they were written to its stdin (one whose
    section is missing, the script cut short, matches nothing)."""
    sections: dict[str, list[str]] = {}
    found: list[list[str]] = []
    status: int | None = None
    self_pid: int | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if not line.startswith(_MARK + " "):
            lines.append(line)
            continue
        word, _, rest = line[len(_MARK) + 1 :].partition(" ")
        if word == "self" and rest.strip().isdigit():
            self_pid = int(rest)
            continue
        if word == "smi":
            status = int(rest) if rest.strip().isdigit() else None
        lines = []
        if word == "pgrep":
            found.append(lines)
        else:
            sections[word] = lines
    parents = parse_ps("\n".join(sections.get("ps", [])))
    mine = _ancestors(self_pid, parents) if self_pid is not None else set()
    matches = {
        pattern: frozenset(int(pid) for pid in pids if pid.strip().isdigit()) - mine
        for pattern, pids in zip(patterns, found, strict=False)
    }
    apps = tuple(parse_compute_apps("\n".join(sections.get("smi", [])))) if status == 0 else None
    return HostReading(apps, parents, matches, missing=status == _NOT_FOUND)


def attribute(reading: HostReading, *, pid: int | None = None, pattern: str | None = None) -> LaunchGpuSample:
    """A launch's share of a reading: the GPU processes among its pid (or pattern matches) and descendants,
    or with neither, every GPU process on the host."""
    apps = reading.apps or ()
    if pid is None and pattern is None:
        pids = frozenset(app.pid for app in apps)
    else:
        roots = {pid} if pid is not None else set(reading.matches.get(pattern or "", ()))
        pids = launch_pids(roots, reading.parents)
    mine = tuple(app for app in apps if app.pid in pids)
    known = [app.used_bytes for app in mine]
    used = None if None in known else sum(b for b in known if b is not None)
    return LaunchGpuSample(used, pids, mine)


class LaunchMemoryTrend:
    """Whether one launch's GPU memory is still filling (`MemoryTrend` over the total its processes hold): a
    process that appears and fills memory is growth, one that exits is a drop, not a stall."""

    def __init__(self, trend: MemoryTrend | None = None) -> None:
        self._trend = trend or MemoryTrend()
        self._latest: int | None = None

    def observe(self, now: float, sample: LaunchGpuSample) -> bool:
        """Record one sample taken at `now` (one with unknown memory records nothing); return whether growing."""
        if sample.used_bytes is None:
            return self._trend.growing(now)
        self._latest = sample.used_bytes
        total = GpuSample(0, "", "", sample.used_bytes, None, None, None, None)
        return self._trend.observe(now, [total])

    def facts(self) -> dict[str, int]:
        """`{"gpu_mem_launch_bytes": ...}` once a reading gave the launch's memory, else empty."""
        return {} if self._latest is None else {"gpu_mem_launch_bytes": self._latest}


@dataclass(frozen=True, slots=True)
class _Taken:
    number: int  # readings are numbered from 1
    at: float  # on the sampler's clock
    reading: HostReading | None  # None: the host could not be reached


class Subscription(Generic[T]):
    """A feed of samples: `async for sample in subscription`, one per reading taken after it subscribed (ends
    if the host has no nvidia-smi). `pick` takes what a reading holds for this subscriber, None: nothing."""

    def __init__(self, sampler: HostGpuSampler, seen: int, pick: Callable[[HostReading], T | None]) -> None:
        self.sampler = sampler
        self._seen = seen
        self._pick = pick

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            taken = await self.sampler._next(self._seen)
            if taken is None:
                raise StopAsyncIteration
            self._seen = taken.number
            if taken.reading is not None and (picked := self._pick(taken.reading)) is not None:
                return picked


class HostGpuSampler:
    """Reads one host's GPU processes for every launch on it (`host` None: this machine; a remote one needs
    `pool`, the shared SSH connections, not closed here); see the module docstring."""

    def __init__(
        self,
        *,
        pool: SSHPool | None = None,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        interval: float = DEFAULT_GPU_INTERVAL,
        clock: Clock | None = None,
    ) -> None:
        if host is not None and pool is None:
            raise ValueError("a remote GPU sampler needs the SSH pool")
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.pool = pool
        self.host = host
        self.port = port
        self.user = user
        self.interval = interval
        self.available = True  # False once nvidia-smi is found missing on the host
        self.readings = 0  # readings taken (each one nvidia-smi run)
        self._clock = clock or MonotonicClock()
        self._patterns: Counter[str] = Counter()  # subscribed patterns, by number of subscribers
        self._subscribers = 0
        self._host_wide = 0  # ... of which host-wide (`subscribe_host`)
        self._latest: _Taken | None = None
        self._busy = False
        self._done = anyio.Event()  # set (and replaced) when a reading ends, taken or not

    @property
    def subscribers(self) -> int:
        """How many launches are subscribed now."""
        return self._subscribers

    @contextmanager
    def subscribe(
        self, *, pid: int | None = None, pattern: str | None = None
    ) -> Iterator[Subscription[LaunchGpuSample]]:
        """Subscribe a launch by its pid or `pgrep -f` pattern (or neither: all GPU processes of the host),
        from the first reading taken after."""
        if pid is not None and pattern is not None:
            raise ValueError("give a pid or a pattern, not both")
        if pid is not None and pid <= 0:
            raise ValueError(f"pid must be positive, not {pid}")
        if pattern is not None:
            check_pattern(pattern)
        self._subscribers += 1
        if pattern is not None:
            self._patterns[pattern] += 1
        try:
            yield Subscription(
                self,
                self.readings,
                lambda reading: (
                    None if reading.apps is None else attribute(reading, pid=pid, pattern=pattern)
                ),
            )
        finally:
            self._subscribers -= 1
            if pattern is not None:
                self._patterns[pattern] -= 1
                if self._patterns[pattern] <= 0:
                    del self._patterns[pattern]

    @contextmanager
    def subscribe_host(self) -> Iterator[Subscription[list[GpuSample]]]:
        """Subscribe to the memory of every GPU of the host (`watch --gpu`), from the first reading taken after."""
        self._subscribers += 1
        self._host_wide += 1
        try:
            yield Subscription(
                self, self.readings, lambda reading: list(reading.gpus) if reading.gpus else None
            )
        finally:
            self._subscribers -= 1
            self._host_wide -= 1

    async def _next(self, seen: int) -> _Taken | None:
        # Single flight: the first subscriber whose turn is due takes the reading; the others wait for it.
        while self.available:
            latest = self._latest
            if latest is not None and latest.number > seen:
                return latest
            if self._busy:
                await self._done.wait()
                continue
            wait = 0.0 if latest is None else latest.at + self.interval - self._clock.now()
            if wait > 0:
                await self._clock.sleep(wait)
                continue
            self._busy = True
            try:
                reading = await self._read()
                self.readings += 1
                self._latest = _Taken(self.readings, self._clock.now(), reading)
                if reading is not None and reading.missing:
                    self.available = False
            finally:
                # a reader cancelled half way leaves the turn to the next subscriber
                self._busy = False
                done, self._done = self._done, anyio.Event()
                done.set()
        return None

    async def _read(self) -> HostReading | None:
        # the per-process script for the launches' subscribers, the per-GPU query for the host-wide ones
        reading = HostReading(None, {}, {})
        if self._subscribers > self._host_wide:
            patterns = sorted(self._patterns)
            done = await self._run(_COMMAND, "".join(f"{p}\n" for p in patterns))
            if done is None:
                return None
            reading = parse_reading(done[1], patterns)
        if self._host_wide:
            done = await self._run(QUERY_GPU_ARGS)
            if done is None:
                return None
            status, text = done
            gpus = tuple(parse_gpu_query(text)) if status == 0 else None
            reading = dataclasses.replace(reading, gpus=gpus, missing=reading.missing or status == _NOT_FOUND)
        return reading

    async def _run(self, argv: Sequence[str], stdin: str | None = None) -> tuple[int | None, str] | None:
        # One command on the host: its exit status and output; None when it could not run (the host cannot be
        # reached, or the command timed out: no reading this time). A command not found is status 127.
        if self.host is None or self.pool is None:
            # Shielded: a cancel while the child is spawned would leak it (and its pipes). This process is among
            # the script's ancestors, so it never matches a pattern on its command line.
            try:
                with anyio.CancelScope(shield=True), anyio.fail_after(_TIMEOUT):
                    result = await anyio.run_process(
                        list(argv), input=None if stdin is None else stdin.encode(), check=False
                    )
            except FileNotFoundError:
                return _NOT_FOUND, ""
            except TimeoutError:
                return None  # a wedged driver
            return result.returncode, result.stdout.decode("utf-8", "replace")
        try:
            done = await self.pool.run(
                self.host, shlex.join(argv), port=self.port, user=self.user, input=stdin, timeout=_TIMEOUT
            )
        except ConnectionLost:
            return None
        stdout = done.stdout
        text = stdout.decode("utf-8", "replace") if isinstance(stdout, bytes) else str(stdout or "")
        return done.exit_status, text
