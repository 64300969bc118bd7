"""Launches in containers, end to end: corpus logs printed by real containers get their replay's verdict through
`watch docker://NAME` and a follower over SSH; an OOM kill is said at once; the daemon resumes a container's log
across its own restart and follows the container's restarts as new incarnations.

The containers run on the test dockerd (tests/docker_daemon.py), the SSH ones are reached through a real sshd
whose sessions get DOCKER_HOST (the `docker_sshd` fixture). A container's log is a corpus file mounted into it,
printed line by line once the follower reads it (the test makes a file the container waits for).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_process import DaemonProcess
from docker_daemon import IMAGE, DockerDaemon
from http_client import get
from sshd_server import SSHDServer

from watchdog.core.verdict import exit_code
from watchdog.follow.follower import Concluded, LaunchFollower, SourceNoted
from watchdog.follow.replay import replay_path
from watchdog.follow.sources.containerlog import parse_timestamp
from watchdog.follow.sources.docker import OOM_SETTLE
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
DEADLINE = 40.0
# seconds: the stall cases' --stall-after; a pause of the printers as long (19 containers and their followers at
# once, beside the rest of the suite on a loaded runner) would be a stall too: CI saw two printers stall at 1 s
STALL_AFTER = 5.0
PACE_US = 1000  # microseconds between two lines a container prints
SIGNALS = {"SIGABRT": 6, "SIGINT": 2, "SIGKILL": 9, "SIGTERM": 15}

# One crash, ready, stall (a log that ends mid-startup) and stop case per engine where the corpus has them; the
# crashes include a traceback that ends the log at its exception line, one cut before it, and a SIGABRT (exit 134)
# with its assert.
CASES = (
    "llamacpp/captured-llamacpp-assert-bad-heads-cpu",
    "llamacpp/captured-llamacpp-ready-cpu",
    "llamacpp/captured-llamacpp-hang-model-fifo-cpu",
    "ollama/ollama-runner-cudamalloc-oom-panic-journald-issue8597",
    "ollama/ollama-ready-listening-windows-0.2.7-issue5816",
    "ollama/ollama-incomplete-model-load-progress-debug-issue10517",
    "sglang/sglang-ep-moe-load-weights-keyerror-w2-weight-scale-inv-dsv3-issue3075",
    "sglang/ready-llama31-8b-single-gpu-docs-v041",
    "sglang/incomplete-multinode-stuck-after-nccl-init-h20-issue4978",
    "tgi/tgi-warmup-oom-webserver-crashed-issue563",
    "tgi/tgi-ready-connected-t5-issue1349",
    "tgi/tgi-3.x-incomplete-after-warmup-kv-blocks-before-connected-issue3301",
    "trtllm/trtllm-cuda-graph-warmup-traceback-cut-before-exception-exaone-issue8802",
    "trtllm/trtllm-serve-1.2.0rc5-autodeploy-ready-elided-middle-dgx-spark-nemotron3nano-jeansblog",
    "trtllm/trtllm-nim-incomplete-kv-cache-allocated-nimdeploy24",
    "vllm/captured-vllm-port-in-use-cpu",
    "vllm/captured-vllm-ready-warning-cpu",
    "vllm/vllm-v0-incomplete-tp8-capturing-graphs-gemma2-issue7593",
    "vllm/captured-vllm-sigterm-startup-cpu",
)

# prints the log line by line (its last line too, newline or not), then ends as the launch
# did: `exit N`, or on (a stall: it prints nothing more)
PRINTER = 'while IFS= read -r l || [ -n "$l" ]; do printf \'%s\\n\' "$l"; usleep {pace}; done </c/log; {end}'


@dataclass(frozen=True)
class Case:
    """A corpus log, how its container ends (None: it stays, silent), and the verdict its replay gives."""

    name: str
    log: Path
    exit: int | None
    want: tuple[object, ...]


def _key(verdict: dict[str, Any]) -> tuple[object, ...]:
    """(outcome, phase, category): a ready launch then stopped cleanly is a ready one (`watch` exits 0 for
    both), a launch that never decided is `incomplete`."""
    state, phase = verdict["state"], verdict["phase"]
    if exit_code(State(state), phase) == 0:
        state = "ready"
    elif state not in ("crashed", "stalled", "stopped"):
        state = "incomplete"
    return (state, phase, (verdict["error"] or {}).get("category"))


def _case(path: str) -> Case:
    log = CORPUS / f"{path}.log"
    label = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))
    captured = label.get("captured") or {}
    _, verdict = replay_path(log)
    want = _key(verdict.to_json())
    if want[0] == "incomplete":  # the log ends mid-startup: followed live, it stalls where it stopped
        return Case(log.stem, log, None, ("stalled", want[1], None))
    if captured.get("signal"):
        code = 128 + SIGNALS[captured["signal"]]
    elif captured.get("exit") is not None:
        code = int(captured["exit"])
    else:
        code = 0 if want[0] == "ready" else 1
    return Case(log.stem, log, code, want)


def test_the_table_covers_every_outcome_of_every_engine() -> None:
    """The table has a crash, a ready and a stall case of each engine, and the corpus's stop cases' engine."""
    cases = [_case(path) for path in CASES]
    outcomes = {(path.split("/")[0], case.want[0]) for path, case in zip(CASES, cases, strict=True)}
    for engine in ("llamacpp", "ollama", "sglang", "tgi", "trtllm", "vllm"):
        assert {(engine, "crashed"), (engine, "ready"), (engine, "stalled")} <= outcomes, engine
    assert ("vllm", "stopped") in outcomes


# -- the containers -----------------------------------------------------------------------------------------


_scanned: list[tuple[float, set[bytes]]] = [(-1.0, set())]
SCAN_EVERY = 0.05  # seconds: one look at /proc serves every container waiting for its reader


def _read(container_id: str) -> bool:
    """Whether a `docker logs` process reads this container (a follower reads its log)."""
    at, words = _scanned[0]
    if time.monotonic() - at > SCAN_EVERY:
        words = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv[:2] == [b"docker", b"logs"]:
                    words.update(argv)
        _scanned[0] = (time.monotonic(), words)
    return container_id.encode() in words


async def _until(check: Callable[[], object], what: str, deadline: float = DEADLINE) -> None:
    """Poll `check` (a look at /proc or the runtime: nothing to wait on) until it is true, under a deadline."""
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline} s: {what}")
        await anyio.sleep(SCAN_EVERY)


class Container:
    """A test container that waits for its go file (`go_when_read`) before it does what its script says; its
    directory is mounted at /c."""

    def __init__(self, docker: DockerDaemon, name: str, workdir: Path) -> None:
        self.docker, self.name = docker, name
        self.dir = workdir / name
        self.dir.mkdir()
        self.id = ""

    async def start(self, script: str, *options: str) -> None:
        argv = ("run", "-d", "--name", self.name, "-v", f"{self.dir}:/c:ro", *options, IMAGE, "sh", "-c")
        waiting = f"while [ ! -e /c/go ]; do usleep 10000; done; {script}"
        self.id = (await anyio.to_thread.run_sync(lambda: self.docker.docker(*argv, waiting))).strip()

    async def go_when_read(self) -> None:
        """Let it go on once a follower reads its log."""
        await _until(lambda: _read(self.id), f"a follower reading {self.name}")
        (self.dir / "go").touch()

    def state(self) -> dict[str, Any]:
        """Its `State`, as `docker inspect` says it."""
        state: dict[str, Any] = json.loads(self.docker.docker("inspect", self.name))[0]["State"]
        return state


async def _printer(docker: DockerDaemon, case: Case, name: str, workdir: Path) -> Container:
    """A container that prints the case's log once told to, then ends as the case says."""
    container = Container(docker, name, workdir)
    (container.dir / "log").write_bytes(case.log.read_bytes())
    end = "exec sleep 1000" if case.exit is None else f"exit {case.exit}"
    await container.start(PRINTER.format(pace=PACE_US, end=end))
    return container


def _mismatches(got: dict[str, tuple[object, ...]], cases: list[Case]) -> dict[str, object]:
    return {c.name: {"got": got.get(c.name), "replay": c.want} for c in cases if got.get(c.name) != c.want}


def _complete(out: bytes) -> float:
    """The time now if `out` is a whole JSON document (the verdict printed), else 0."""
    try:
        json.loads(out)
    except ValueError:
        return 0.0
    return time.time()


async def _watch(target: str, *options: str) -> tuple[dict[str, Any], float]:
    """`watch --json TARGET` to its end: its verdict, and the Unix time it was printed (when its JSON was
    whole, not when the process had exited: the interpreter's teardown is not the verdict's latency)."""
    argv = [sys.executable, "-m", "watchdog.cli", "watch", "--json", *options, target]
    async with await anyio.open_process(argv) as watch:
        assert watch.stdout is not None
        out, said = b"", 0.0
        async for data in watch.stdout:
            out += data
            said = said or _complete(out)
        await watch.wait()
    return json.loads(out), said


@pytest.mark.timeout(150)
async def test_corpus_launches_in_containers_get_their_replay_verdict_through_watch(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """Each case printed by a container gets from `watch --json docker://NAME` (this machine's dockerd through
    DOCKER_HOST) the verdict `replay` gives its file: a container's exit never overrides what the log said."""
    cases = [_case(path) for path in CASES]
    got: dict[str, tuple[object, ...]] = {}

    async def one(n: int, case: Case) -> None:
        printer = await _printer(docker, case, f"w{n}", tmp_path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(printer.go_when_read)
            verdict, _ = await _watch(f"docker://{printer.name}", "--stall-after", str(STALL_AFTER))
        got[case.name] = _key(verdict)

    # 19 containers and their `watch` processes at once: past 40 s once in a CI run on 2 cores loaded by more
    with anyio.fail_after(3 * DEADLINE):
        async with anyio.create_task_group() as tg:
            for n, case in enumerate(cases):
                tg.start_soon(one, n, case)
    assert not _mismatches(got, cases)


@asynccontextmanager
async def _pool(server: SSHDServer) -> AsyncIterator[SSHPool]:
    options = SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )
    async with SSHPool(options) as pool:
        yield pool


async def test_corpus_launches_in_containers_get_their_replay_verdict_over_ssh(
    docker: DockerDaemon, docker_sshd: SSHDServer, tmp_path: Path
) -> None:
    """Each case printed by a container on an SSH host (`docker://user@host:port/NAME`) gets from a follower its
    replay's verdict, and keeps it once the container's end is said: a crash its category, a ready launch then
    stopped (exit 0) its ready history."""
    cases = [_case(path) for path in CASES]
    first: dict[str, tuple[object, ...]] = {}
    last: dict[str, tuple[object, ...]] = {}
    server = docker_sshd

    async def one(pool: SSHPool, n: int, case: Case) -> None:
        printer = await _printer(docker, case, f"s{n}", tmp_path)
        target = parse_target(f"docker://{server.user}@{server.host}:{server.port}/{printer.name}")
        follower = LaunchFollower(LaunchSpec(case.name, target, stall_after=STALL_AFTER), pool=pool)
        async with anyio.create_task_group() as tg, follower.updates:
            tg.start_soon(follower.run)
            await printer.go_when_read()
            ended = case.exit is None  # a stalled one stays: nothing more to wait for after its verdict
            async for update in follower.updates:
                if isinstance(update, Concluded) and case.name not in first:
                    first[case.name] = _key(update.verdict.to_json())
                ended |= isinstance(update, SourceNoted) and update.kind == "ended"
                if ended and case.name in first:
                    break
            last[case.name] = _key(follower.status().verdict.to_json())
            tg.cancel_scope.cancel()

    with anyio.fail_after(DEADLINE):
        async with _pool(server) as pool, anyio.create_task_group() as tg:
            for n, case in enumerate(cases):
                tg.start_soon(one, pool, n, case)
    assert not _mismatches(first, cases)
    assert not _mismatches(last, cases)


async def test_an_oom_killed_container_is_crashed_killed_within_two_seconds_naming_its_limit(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """`watch docker://NAME` of a container the kernel OOM-kills at its 8 MiB limit, with no last words in its
    log, says crashed / killed within 2 s of the container's death (its FinishedAt), the hint naming 8 MiB."""
    container = Container(docker, "oom", tmp_path)
    await container.start(
        'echo loading; x=$(head -c 50000000 /dev/zero | tr "\\0" a); echo never',
        "-m",
        "8m",
        "--memory-swap",
        "8m",
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(container.go_when_read)
        verdict, said = await _watch("docker://oom")
    state = container.state()
    # not State.OOMKilled: docker leaves it unset when the kernel's OOM event reaches it after the exit (the
    # source asks the events then: tests/test_sources_docker.py), which a loaded machine does now and then
    assert state["ExitCode"] == 137
    died = parse_timestamp(state["FinishedAt"])
    death = died[0] + died[1] / 1e9
    recorded = docker.oom_recorded_at("oom")
    assert recorded is not None, "the kernel did not OOM-kill the container (docker recorded no oom event)"
    assert (verdict["state"], verdict["error"]["category"]) == ("crashed", "killed")
    if recorded - death >= OOM_SETTLE:
        # the runtime recorded the kill after the source had stopped looking for it: a SIGKILL (137) it was
        assert "137" in verdict["error"]["summary"], (
            f"recorded {recorded - death:.2f} s late: {verdict['error']}"
        )
        return
    late = said - max(death, recorded)
    assert late < 2.0, (
        f"said {late:.2f} s after the death (recorded {recorded - death:.2f} s after it): {verdict}"
    )
    assert "8 MiB" in verdict["error"]["hint"]
    assert "OOMKilled" in verdict["error"]["summary"]


# -- the daemon ---------------------------------------------------------------------------------------------

# prints N numbered lines (a few ms apart, the shell's pace), then ends with CODE
NUMBERED = 'i=0; while [ $i -lt {n} ]; do echo "INFO line $i of the launch"; i=$((i+1)); usleep {pace}; done; exit {code}'


def _daemon_config(tmp_path: Path, container: str) -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "json"

[launches.svc]
container = "{container}"
engine = "vllm"
"""
    )
    return config


@contextmanager
def _daemon(config: Path, docker: DockerDaemon) -> Iterator[tuple[DaemonProcess, str]]:
    """`watchdog run` with DOCKER_HOST of the test dockerd; it and the URL it serves on."""
    daemon = DaemonProcess(config, deadline=DEADLINE, env=docker.env())
    try:
        yield daemon, daemon.wait(event="http_listening")["url"]
    except BaseException:
        print("".join(daemon.text[-80:]))  # the daemon's last log lines, beside a failure's report
        raise
    finally:
        daemon.close()


def _status(url: str) -> dict[str, Any]:
    status: dict[str, Any] = get(url + "status").json()[0]
    return status


async def _status_until(url: str, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """Poll the daemon's /status until `check` holds (the daemon has no event for each line read)."""
    seen: list[dict[str, Any]] = []

    def look() -> bool:
        seen[:] = [_status(url)]
        return check(seen[0])

    try:
        await _until(look, what)
    except AssertionError as exc:  # what the daemon said last: the state, the lines read, its source's detail
        raise AssertionError(f"{exc}; the last status: {json.dumps(seen[0] if seen else None)}") from None
    return seen[0]


async def test_a_daemon_restarted_in_the_middle_of_a_containers_log_loses_and_repeats_no_line(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """The daemon killed (-9) and then stopped (SIGTERM) while a container prints its log, started again each
    time: it resumes from its checkpoint's cursor, and the analyzer has read every line once (lines_read and
    bytes_read are the log's)."""
    lines = 1500
    container = Container(docker, "svc", tmp_path)
    await container.start(NUMBERED.format(n=lines, pace=2000, code=0))
    config = _daemon_config(tmp_path, "svc")
    with _daemon(config, docker) as (daemon, url):
        await container.go_when_read()
        await _status_until(url, lambda s: s["lines_read"] >= lines // 4, "a quarter of the log read")
        # the store writes behind (within TRANSITION_BATCH_DELAY): a kill before the first checkpoint is in the
        # file would read the log from its start again (nothing stored to resume from): not what this pins
        await _until(lambda: (_checkpointed(tmp_path / "state", "svc") or 0) > 0, "a checkpoint written")
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(timeout=DEADLINE)
    with _daemon(config, docker) as (daemon, url):
        resumed = daemon.wait(event="resuming from checkpoint", launch="svc")
        await _status_until(url, lambda s: s["lines_read"] >= lines // 2, "half the log read")
        daemon.stop()
    with _daemon(config, docker) as (daemon, url):
        again = daemon.wait(event="resuming from checkpoint", launch="svc")
        status = await _status_until(url, lambda s: s["state"] == "stopped", "the container's exit said")
        daemon.stop()
    assert 0 < resumed["offset"] < again["offset"]
    log = "".join(f"INFO line {i} of the launch\n" for i in range(lines)).encode()
    assert (status["lines_read"], status["bytes_read"]) == (lines, len(log))
    assert status["incarnation"] == 1


async def test_a_container_restarted_by_its_policy_is_a_new_incarnation_with_every_line_once(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """A container that crashes and is restarted by `--restart on-failure:1` while the daemon follows it: /status
    goes to incarnation 2, the history has both crashes, and every line of both runs was read once."""
    case = _case("vllm/captured-vllm-port-in-use-cpu")
    container = await _printer(docker, case, "svc", tmp_path)
    config = _daemon_config(tmp_path, "svc")
    # the printer's container, restarted once by its policy
    docker.docker("rm", "-f", "svc")
    await container.start(PRINTER.format(pace=PACE_US, end="exit 1"), "--restart", "on-failure:1")
    with _daemon(config, docker) as (daemon, url):
        await container.go_when_read()
        status = await _status_until(
            url, lambda s: s["incarnation"] == 2 and s["state"] == "crashed", "the second run's crash"
        )
        daemon.stop()
    with _daemon(config, docker) as (daemon, url):  # restarted after the container's end: nothing read again
        daemon.wait(event="resuming from checkpoint", launch="svc")
        daemon.wait(event="source", launch="svc", kind="ended")  # read from the cursor to the run's end again
        again = _status(url)
        daemon.stop()
    assert status["error"]["category"] == "port_in_use"
    log = case.log.read_bytes()
    assert (status["lines_read"], status["bytes_read"]) == (2 * log.count(b"\n"), 2 * len(log))
    keep = ("state", "phase", "incarnation", "lines_read", "bytes_read")
    assert {k: again[k] for k in keep} == {k: status[k] for k in keep}
    history = _history(tmp_path / "state", "svc")
    assert [(h["incarnation"], h["state"]) for h in history] == [(1, "crashed"), (2, "crashed")]


def _history(state: Path, launch: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", launch, "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(json.loads(out), key=lambda r: r["incarnation"])


# prints the file's lines as PRINTER does
PRINT = 'while IFS= read -r l || [ -n "$l" ]; do printf \'%s\\n\' "$l"; usleep {pace}; done <{file}'
# the first run prints /c/first, waits for /c/go2, prints /c/rest and fails; the run its policy starts then (its
# file system kept: /tmp/ran) prints /c/second and stays
TWO_RUNS = (
    "if [ ! -e /tmp/ran ]; then touch /tmp/ran; {first}; while [ ! -e /c/go2 ]; do usleep 10000; done; {rest}; "
    "exit 1; else {second}; exec sleep 1000; fi"
)
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"


def _log_lines(path: Path) -> list[bytes]:
    """The log's lines as the printer prints them (each ends in a newline)."""
    return [line + b"\n" for line in path.read_bytes().removesuffix(b"\n").split(b"\n")]


def _checkpointed(state: Path, launch: str) -> int | None:
    """The offset of the launch's checkpoint in the state file (None: none yet)."""
    db = state / "watchdog.sqlite3"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT read_offset FROM checkpoints WHERE launch = ?", (launch,)).fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return None
    finally:
        conn.close()
    return None if row is None else int(row[0])


# two daemon starts and docker's restart: 15-30 s alone, past 60 s twice on a loaded runner
@pytest.mark.timeout(150)
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
async def test_a_run_restarted_by_its_policy_while_the_daemon_is_down_is_read_to_its_end(
    docker: DockerDaemon, tmp_path: Path, how: str
) -> None:
    """The daemon reads a container's run to mid-start (capturing CUDA graphs) and is stopped (`how`); the run
    prints on and fails, `--restart on-failure:1` starts the next, which becomes ready: the daemon started again
    resumes in the first run from its checkpoint, reads its rest and says its end (crashed, its exit code from
    the runtime's events, the policy named), then the second run as incarnation 2: every line of both runs read
    once."""
    crash, ready = _log_lines(CRASH), _log_lines(READY)
    first, rest = crash[:60], crash[60:71]  # the rest ends before the engine's error: its end says it
    container = Container(docker, "svc", tmp_path)
    for name, lines in (("first", first), ("rest", rest), ("second", ready)):
        (container.dir / name).write_bytes(b"".join(lines))
    prints = {name: PRINT.format(pace=PACE_US, file=f"/c/{name}") for name in ("first", "rest", "second")}
    await container.start(TWO_RUNS.format(**prints), "--restart", "on-failure:1")
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n\n'
        '[launches.svc]\ncontainer = "svc"\n'
    )
    with _daemon(config, docker) as (daemon, url):
        await container.go_when_read()
        await _status_until(url, lambda s: s["lines_read"] == len(first), "the first part read")
        offset = len(b"".join(first))
        await _until(
            lambda: _checkpointed(tmp_path / "state", "svc") == offset, "the first part checkpointed"
        )
        if how == "SIGTERM":
            daemon.stop()
        else:
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait(timeout=DEADLINE)
    started = container.state()["StartedAt"]
    (container.dir / "go2").touch()
    await _until(
        lambda: (
            (s := container.state())["Running"] and s["StartedAt"] != started and s["Restarting"] is False
        ),
        "the first run's failure and the policy's restart",
    )
    with _daemon(config, docker) as (daemon, url):
        resumed = daemon.wait(event="resuming from checkpoint", launch="svc")
        status = await _status_until(
            url,
            lambda s: s["lines_read"] == len(crash[:71] + ready) and s["state"] == "ready",
            "both runs read, the second ready",
        )
        ended = daemon.wait(event="source", launch="svc", kind="ended")["detail"]
        daemon.stop()
    assert resumed["offset"] == offset
    assert "restart policy (on-failure)" in ended
    # Docker's events kept the run's end (the watchdog was down, the runtime was not): its exit code is said
    assert "exited with code 1" in ended
    assert status["bytes_read"] == len(b"".join(first + rest + ready))
    assert (status["incarnation"], status["incarnations"]) == (2, 2)
    history = _history(tmp_path / "state", "svc")
    assert [(h["incarnation"], h["state"]) for h in history] == [(1, "crashed"), (2, "ready")]
    # no error in its log: its end, said without an exit code, is the crash, in the phase the log had reached
    crashed = history[0]["transitions"][-1]
    assert (history[0]["phase"], crashed["state"]) == ("capturing_graphs", "crashed"), history[0]
    assert "restart policy (on-failure)" in crashed["reason"]
