"""The host GPU sampler: memory attributed to each launch's processes, one nvidia-smi per host and interval."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from sshd_server import SSHDServer, running_sshd

from watchdog.core.lifecycle import State
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, Transitioned
from watchdog.follow.probes.gpusampler import (
    HostGpuSampler,
    LaunchGpuSample,
    LaunchMemoryTrend,
    attribute,
    launch_pids,
    parse_ps,
    parse_reading,
)
from watchdog.follow.probes.nvidia import MIB, GpuProcess, parse_compute_apps
from watchdog.follow.sources import SSHOptions, SSHPool, parse_target
from watchdog.follow.testing import ManualClock, ScriptedSource

pytestmark = pytest.mark.anyio

GPU = Path(__file__).parent / "fixtures" / "gpu"
MARK = "@@watchdog-gpu"
DEADLINE = 20.0  # seconds any real-time wait here may take at most
A_START_MIB, A_STEP_MIB, B_MIB, OTHER_MIB = 1000, 1024, 5000, 7000
LOAD_WEIGHTS = b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n"

# A made-up host: 100 (launch A's server) -> 101, 102 (its GPU workers) -> 103; 200 (launch B) -> 201;
# 300 -> 301 (the sampler's own sh, the daemon above it); 1 is init.
PS_TREE = """\
    1     0
  100     1
  101   100
  102   100
  103   101
  200     1
  201   200
  300     1
  301   300
"""


def _output(smi: str, *, status: int = 0, pgrep: tuple[str, ...] = (), self_pid: int = 301) -> str:
    """What the sampler's script prints on a host: nvidia-smi's status and rows, ps, and pgrep per pattern."""
    parts = [f"{MARK} self {self_pid}", f"{MARK} smi {status}", smi, f"{MARK} ps", PS_TREE]
    for found in pgrep:
        parts += [f"{MARK} pgrep", found]
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            PS_TREE,
            {1: 0, 100: 1, 101: 100, 102: 100, 103: 101, 200: 1, 201: 200, 300: 1, 301: 300},
            id="tree",
        ),
        pytest.param("  PID  PPID\n 7 1\n\n 8 7 extra\n9\n", {7: 1}, id="header-blank-and-odd-lines"),
        pytest.param("", {}, id="empty"),
    ],
)
def test_parse_ps(text: str, expected: dict[int, int]) -> None:
    """`ps -e -o pid=,ppid=` becomes pid -> parent; anything that is not two numbers is skipped."""
    assert parse_ps(text) == expected


@pytest.mark.parametrize(
    ("roots", "expected"),
    [
        pytest.param({100}, {100, 101, 102, 103}, id="children-and-grandchildren"),
        pytest.param({101}, {101, 103}, id="a-subtree-only"),
        pytest.param({200, 100}, {100, 101, 102, 103, 200, 201}, id="two-roots"),
        pytest.param({999}, {999}, id="a-root-ps-did-not-list"),
        pytest.param(set(), set(), id="no-root"),
    ],
)
def test_launch_pids(roots: set[int], expected: set[int]) -> None:
    """A launch's processes are its roots and every descendant, and nothing beside them."""
    assert launch_pids(roots, parse_ps(PS_TREE)) == expected


def test_launch_pids_survives_a_parent_loop() -> None:
    """A ps table with a loop (pid reuse caught mid-read) ends rather than spinning."""
    assert launch_pids({5}, {5: 6, 6: 5}) == {5, 6}


def test_real_sample_charged_to_the_launch_whose_child_holds_it() -> None:
    """The real H200 row (pid 416, 38666 MiB) goes to the launch whose server has 416 as a child."""
    real = (GPU / "query-apps.csv").read_text()
    assert parse_compute_apps(real) == [GpuProcess(416, "python3", 38666 * MIB)]
    tree = PS_TREE + "  416   100\n"
    reading = parse_reading(
        _output(real, pgrep=("100\n", "200\n")).replace(PS_TREE, tree), ["sglang.launch_server", "vllm serve"]
    )
    a = attribute(reading, pattern="sglang.launch_server")
    b = attribute(reading, pattern="vllm serve")
    assert (a.used_bytes, b.used_bytes) == (38666 * MIB, 0)
    assert 416 in a.pids
    assert a.processes == (GpuProcess(416, "python3", 38666 * MIB),)
    assert attribute(reading, pid=200) == b  # by pid: the same as by pattern


def test_two_launches_one_reading() -> None:
    """One reading serves every launch: each is charged only with its own processes' memory."""
    smi = "101, python3, 30000\n103, sglang::scheduler, 2000\n201, python3, 5000\n999, other, 7000\n"
    reading = parse_reading(_output(smi, pgrep=("100\n", "200\n")), ["pattern-a", "pattern-b"])
    assert attribute(reading, pattern="pattern-a").used_bytes == 32000 * MIB
    assert attribute(reading, pid=200).used_bytes == 5000 * MIB
    assert attribute(reading).used_bytes == 44000 * MIB  # neither pid nor pattern: the whole host
    assert attribute(reading, pattern="never-subscribed").used_bytes == 0


def test_the_samplers_own_shell_and_ancestors_never_match() -> None:
    """A pattern that matches the sampler's own shell or the daemon above it does not charge them."""
    smi = "300, python3, 100\n"  # even if the daemon held GPU memory
    reading = parse_reading(_output(smi, pgrep=("300\n301\n200\n",)), ["greedy"])
    assert reading.matches == {"greedy": frozenset({200})}
    assert attribute(reading, pattern="greedy").used_bytes == 0


@pytest.mark.parametrize(
    ("status", "smi", "apps", "missing"),
    [
        pytest.param(127, "", None, True, id="not-installed"),
        pytest.param(
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            None,
            False,
            id="no-driver",
        ),
        pytest.param(0, "", (), False, id="no-gpu-process"),
    ],
)
def test_nvidia_smi_failures(
    status: int, smi: str, apps: tuple[GpuProcess, ...] | None, missing: bool
) -> None:
    """nvidia-smi missing, failing or idle is told apart: missing ends the feed, failing gives no sample."""
    reading = parse_reading(_output(smi, status=status), [])
    assert (reading.apps, reading.missing) == (apps, missing)


def test_memory_not_reported_per_process_is_unknown() -> None:
    """A launch process whose memory nvidia-smi shows as [N/A] (containers) leaves the launch's memory unknown."""
    reading = parse_reading(_output("101, python3, [N/A]\n201, python3, 5000\n"), [])
    assert attribute(reading, pid=100).used_bytes is None
    assert attribute(reading, pid=200).used_bytes == 5000 * MIB


def test_a_reading_cut_short_matches_nothing() -> None:
    """A script cut off before its pgrep sections leaves the patterns without matches, not misassigned."""
    reading = parse_reading(_output("101, python3, 10\n"), ["a", "b"])
    assert reading.matches == {}
    assert attribute(reading, pattern="a").used_bytes == 0


def _sample(mib: int | None) -> LaunchGpuSample:
    return LaunchGpuSample(None if mib is None else mib * MIB, frozenset(), ())


def test_launch_memory_trend() -> None:
    """A launch's memory rising past the threshold is growth; unknown samples record nothing; facts follow."""
    trend = LaunchMemoryTrend()
    assert trend.facts() == {}
    assert trend.observe(0.0, _sample(1000)) is False
    assert trend.observe(5.0, _sample(None)) is False
    assert trend.facts() == {"gpu_mem_launch_bytes": 1000 * MIB}
    assert trend.observe(10.0, _sample(2000)) is True
    flat = LaunchMemoryTrend()
    assert [flat.observe(t, _sample(5000)) for t in (0.0, 5.0, 10.0)] == [False, False, False]


# -- a real host: this machine, a fake nvidia-smi, real process trees ----------------------------------------


@dataclass
class _Host:
    """Two launches' process trees (a root with a child, as engines run GPU workers) and a fake nvidia-smi."""

    bin: Path
    calls: Path
    pattern_a: str
    root_a: subprocess.Popen[bytes]
    root_b: subprocess.Popen[bytes]

    @property
    def smi_calls(self) -> int:
        return int(self.calls.read_text()) if self.calls.exists() else 0


def _tree(tag: str) -> subprocess.Popen[bytes]:
    # `tag` is $0 of the root shell: on its command line for pgrep -f, not on its child's
    return subprocess.Popen(["sh", "-c", "sleep 600 & wait", tag], start_new_session=True)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[_Host]:
    """This machine with two launches and a `nvidia-smi` in tmp_path/bin: A's child grows 1 GiB per call, B's
    child holds 5000 MiB, a process of no launch 7000 MiB."""
    token = secrets.token_hex(4)
    pattern_a = f"gpusampler-test-a-{token}"
    root_a, root_b = _tree(pattern_a), _tree(f"gpusampler-test-b-{token}")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {calls} 2>/dev/null || echo 0); echo $((n + 1)) > {calls}\n"
        f'for c in $(pgrep -P {root_a.pid}); do echo "$c, python3, $(({A_START_MIB} + n * {A_STEP_MIB}))"; done\n'
        f'for c in $(pgrep -P {root_b.pid}); do echo "$c, python3, {B_MIB}"; done\n'
        f'echo "4242, /usr/bin/someone-else, {OTHER_MIB}"\n'
    )
    script.chmod(0o755)
    try:
        yield _Host(bin_dir, calls, pattern_a, root_a, root_b)
    finally:
        for root in (root_a, root_b):
            os.killpg(root.pid, signal.SIGKILL)  # the root and its child: this test's own processes
            root.wait()


async def _samples(sampler: HostGpuSampler, count: int, **who: Any) -> list[LaunchGpuSample]:
    out: list[LaunchGpuSample] = []
    with anyio.fail_after(DEADLINE), sampler.subscribe(**who) as feed:
        async for sample in feed:
            out.append(sample)
            if len(out) == count:
                break
    return out


async def test_two_launches_one_growing_one_stalled(host: _Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two launches on one host: B, whose memory is flat, stalls while A, whose memory grows, does not, and
    the host's nvidia-smi runs once per reading for both."""
    monkeypatch.setenv("PATH", f"{host.bin}:{os.environ['PATH']}")
    sampler = HostGpuSampler(interval=0.1)
    common: dict[str, Any] = {
        "engine": "sglang",
        "gpu": True,
        "gpu_interval": 0.1,
        "stall_after": 1.5,
        "tick": 0.05,
    }
    specs = {
        "a": LaunchSpec(name="a", target=parse_target("/a.log"), process=host.pattern_a, **common),
        "b": LaunchSpec(name="b", target=parse_target("/b.log"), pid=host.root_b.pid, **common),
    }
    sources = {name: ScriptedSource() for name in specs}
    followers = {
        name: LaunchFollower(spec, source=sources[name], gpu_sampler=sampler) for name, spec in specs.items()
    }
    seen: dict[str, list[State]] = {"a": [], "b": []}
    b_stalled = anyio.Event()

    async def collect(name: str) -> None:
        with followers[name].updates as updates:
            async for update in updates:
                if isinstance(update, Transitioned):
                    seen[name].append(update.transition.state)
                elif isinstance(update, Concluded) and update.state == State.STALLED and name == "b":
                    b_stalled.set()

    async with anyio.create_task_group() as tg:
        for name, follower in followers.items():
            tg.start_soon(collect, name)
            tg.start_soon(follower.run)
            await sources[name].append(LOAD_WEIGHTS)
            await sources[name].catch_up()
        with anyio.fail_after(DEADLINE):
            await b_stalled.wait()
        # A's stall time passes again, counted in readings (each 0.1 s apart): A stays busy loading
        await _samples(sampler, 20)
        status = {name: follower.status().to_json() for name, follower in followers.items()}
        assert sampler.subscribers == 2  # the two followers, still following
        tg.cancel_scope.cancel()
    assert (status["a"]["state"], status["b"]["state"]) == ("loading_weights", "stalled")
    assert State.STALLED not in seen["a"]
    assert status["b"]["facts"]["gpu_mem_launch_bytes"] == B_MIB * MIB
    assert status["a"]["facts"]["gpu_mem_launch_bytes"] > (A_START_MIB + 10 * A_STEP_MIB) * MIB
    assert host.smi_calls == sampler.readings  # one nvidia-smi per reading, whatever the launches
    assert sampler.subscribers == 0


async def test_subscribers_share_a_reading_and_the_sampler_stops_without_them(
    host: _Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Launches subscribed together share each reading; once none is left, nvidia-smi is not run again."""
    monkeypatch.setenv("PATH", f"{host.bin}:{os.environ['PATH']}")
    clock = ManualClock()
    sampler = HostGpuSampler(interval=5.0, clock=clock)
    got: dict[str, LaunchGpuSample] = {}

    async def first(name: str, **who: Any) -> None:
        got[name] = (await _samples(sampler, 1, **who))[0]

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(first, "a", pattern=host.pattern_a))
        tg.start_soon(partial(first, "b", pid=host.root_b.pid))
    assert host.smi_calls == sampler.readings == 1
    assert (got["a"].used_bytes, got["b"].used_bytes) == (A_START_MIB * MIB, B_MIB * MIB)
    await clock.advance(50.0)  # ten intervals with nobody subscribed
    assert host.smi_calls == 1
    assert sampler.subscribers == 0


async def test_a_host_without_nvidia_smi_ends_the_feed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host with no nvidia-smi the sampler says so once and every subscriber's feed ends."""
    if shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has a real nvidia-smi in /usr/bin or /bin")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    sampler = HostGpuSampler(interval=0.1)
    with anyio.fail_after(DEADLINE):
        assert await _samples(sampler, 1, pattern="anything") == []
        assert await _samples(sampler, 1) == []
    assert (sampler.available, sampler.readings) == (False, 1)


@pytest.mark.sshd
async def test_over_real_sshd(host: _Host, sshd: SSHDServer, tmp_path: Path) -> None:
    """Over a real sshd whose sessions have the fake nvidia-smi on their PATH, each launch gets its share."""
    # its own sshd: the session fixture's PATH cannot be changed (sshd's SetEnv sets it for every session)
    with running_sshd(tmp_path / "sshd", extra_config=[f"SetEnv PATH={host.bin}:/usr/bin:/bin"]) as server:
        options = SSHOptions(
            known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
        )
        async with SSHPool(options) as pool:
            sampler = HostGpuSampler(
                pool=pool, host=server.host, port=server.port, user=server.user, interval=0.1
            )
            a: list[LaunchGpuSample] = []
            b: list[LaunchGpuSample] = []

            async def take(into: list[LaunchGpuSample], **who: Any) -> None:
                into.extend(await _samples(sampler, 3, **who))

            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(take, a, pattern=host.pattern_a))
                tg.start_soon(partial(take, b, pid=host.root_b.pid))
    assert [s.used_bytes for s in b] == [B_MIB * MIB] * 3
    used_a = [s.used_bytes or 0 for s in a]
    assert used_a == sorted(set(used_a))  # growing at every reading
    assert used_a[0] >= A_START_MIB * MIB
    assert host.root_a.pid in a[0].pids
    assert host.root_b.pid not in a[0].pids
    assert all(4242 not in s.pids for s in a + b)
    assert host.smi_calls == sampler.readings


def test_config_gpu_key_reaches_the_spec(tmp_path: Path) -> None:
    """`gpu = true` in a launch's table turns GPU sampling on in its follower spec; it is off by default."""
    from watchdog.config.loading import load_config  # noqa: PLC0415

    path = tmp_path / "config.toml"
    path.write_text('[launches.on]\nlog = "/a.log"\ngpu = true\n\n[launches.off]\nlog = "/b.log"\n')
    config = load_config(path)
    assert (config.launch_spec("on").gpu, config.launch_spec("off").gpu) == (True, False)


async def test_daemon_shares_one_sampler_per_host(
    host: _Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon gives the GPU launches of one host one sampler: B stalls while A, loading, does not."""
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415

    monkeypatch.setenv("PATH", f"{host.bin}:{os.environ['PATH']}")
    common: dict[str, Any] = {"engine": "sglang", "gpu_interval": 0.1, "stall_after": 1.5, "tick": 0.05}
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b", "c")}
    for log in logs.values():
        log.write_bytes(LOAD_WEIGHTS)
    plans = {
        "a": LaunchPlan(
            LaunchSpec("a", parse_target(str(logs["a"])), process=host.pattern_a, gpu=True, **common)
        ),
        "b": LaunchPlan(
            LaunchSpec("b", parse_target(str(logs["b"])), pid=host.root_b.pid, gpu=True, **common)
        ),
        "c": LaunchPlan(LaunchSpec("c", parse_target(str(logs["c"])), **common)),
    }
    daemon = Daemon(plans, handle_signals=False)
    sampler = daemon._sampler(plans["a"])
    assert sampler is not None
    assert daemon._sampler(plans["b"]) is sampler
    assert daemon._sampler(plans["c"]) is None
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run)
        with anyio.fail_after(DEADLINE):
            await daemon.wait_until(lambda st: any(s["name"] == "b" and s["state"] == "stalled" for s in st))
        await _samples(sampler, 20)  # A's stall time passes again
        status = {s["name"]: s for s in daemon.status_json()}
        tg.cancel_scope.cancel()
    assert (status["a"]["state"], status["b"]["state"]) == ("loading_weights", "stalled")
    assert status["a"]["facts"]["gpu_mem_launch_bytes"] > status["b"]["facts"]["gpu_mem_launch_bytes"]
    assert "gpu_mem_launch_bytes" not in status["c"]["facts"]
    assert host.smi_calls == sampler.readings
