"""Standard input as a source (`watchdog replay -`, `watchdog watch -`), and the platform's word on the end of a
process (`Ended`): the verdict is the one of the file, and a container's end is read as the platform says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from watchdog.core.verdict import Verdict
from watchdog.follow.follower import LaunchFollower
from watchdog.follow.replay import replay_path
from watchdog.follow.sources import CaughtUp, Chunk, Ended, parse_target
from watchdog.follow.sources.stdin import StdinSource
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ScriptedSource

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOGS = sorted(CORPUS.glob("*/*.log"))
EXAMPLE = Path(__file__).parent.parent / "watchdog" / "examples" / "sglang-ep8-oom.log"
CLI = [sys.executable, "-m", "watchdog.cli"]


def _key(v: Verdict) -> tuple[object, ...]:
    error = v.error
    return v.state.value, v.phase.value, error and error.category, error and error.summary


@pytest.fixture(scope="module")
def replayed() -> dict[Path, tuple[object, ...]]:
    return {log: _key(replay_path(log)[1]) for log in LOGS}


def test_replay_of_standard_input_is_the_replay_of_the_file(
    monkeypatch: pytest.MonkeyPatch, replayed: dict[Path, tuple[object, ...]]
) -> None:
    """Every corpus log read from standard input (`replay -`) gives its file's verdict."""
    changed = []
    for log in LOGS:
        with log.open("rb") as f:
            monkeypatch.setattr(sys, "stdin", f)
            piped = _key(replay_path(Path("-"))[1])
        if piped != replayed[log]:
            changed.append(f"{log.parent.name}/{log.name}: {replayed[log]} -> {piped}")
    assert changed == []
    assert len(LOGS) >= 285


async def _follow_pipe(data: bytes) -> Verdict:
    # a follower on the read end of a pipe that a thread fills and closes, as `cat log | watchdog watch -`
    read, write = os.pipe()

    def fill() -> None:
        with os.fdopen(write, "wb") as out:
            for start in range(0, len(data), 4096):
                out.write(data[start : start + 4096])

    writer = threading.Thread(target=fill)
    writer.start()
    try:
        follower = LaunchFollower(
            LaunchSpec(name="piped", target=parse_target("-")), source=StdinSource(read)
        )
        with follower.updates:
            async with anyio.create_task_group() as tg:
                tg.start_soon(follower.run)
                async for _ in follower.updates:
                    pass
    finally:
        writer.join()
        os.close(read)
    assert follower.concluded is not None
    return follower.concluded.verdict


def test_a_pipe_followed_to_its_end_gives_the_files_verdict(replayed: dict[Path, tuple[object, ...]]) -> None:
    """Every corpus log piped into a follower (`watch -`) is judged at the pipe's end as `replay` judges the file."""

    async def main() -> list[str]:
        changed = []
        for log in LOGS:
            piped = _key(await _follow_pipe(log.read_bytes()))
            if piped[:3] != replayed[log][:3]:
                changed.append(f"{log.parent.name}/{log.name}: {replayed[log]} -> {piped}")
        return changed

    assert anyio.run(main) == []


def test_watch_dash_reads_a_live_pipe_to_a_verdict(tmp_path: Path) -> None:
    """`watchdog watch --json -` follows a pipe as it is written (the weights' phase seen before the traceback is
    written) and exits with the crash's verdict and code when it comes."""
    data = EXAMPLE.read_bytes()
    cut = data.index(b"Traceback")
    events = tmp_path / "events.jsonl"
    command = [*CLI, "watch", "--json", "--events", str(events), "-"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(data[:cut])
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while b'"state": "allocating_kv_cache"' not in (events.read_bytes() if events.exists() else b""):
        assert proc.poll() is None, "watch ended before the rest was written"
        assert time.monotonic() < deadline, "the first part was not followed"
        time.sleep(0.05)
    proc.stdin.write(data[cut:])
    proc.stdin.close()
    with proc.stdout:
        verdict = json.loads(proc.stdout.read())
    assert proc.wait(timeout=60) == 1
    assert (verdict["state"], verdict["phase"], verdict["error"]["category"]) == (
        "crashed",
        "allocating_kv_cache",
        "oom",
    )


def test_replay_dash_on_the_command_line() -> None:
    """`watchdog replay --json -` reads standard input: the example's crash, exit code 1."""
    with EXAMPLE.open("rb") as f:
        done = subprocess.run(
            [*CLI, "replay", "--json", "-"], stdin=f, capture_output=True, timeout=60, check=False
        )
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["category"] == "oom"


async def _ended(lines: bytes, ended: Ended, *, live: bool = False) -> Verdict:
    # a follower on a scripted source: the lines, then the platform's word that the process is gone; `live`:
    # the follower had caught up with an empty log before the lines came (they are judged as they come)
    source = ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="box", target=parse_target("docker://box")), source=source)
    with follower.updates:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await source.followed.wait()
            if live:
                await source.push(CaughtUp(0))
            await source.push(Chunk(0, lines))
            await source.push(CaughtUp(len(lines)))
            await source.push(ended)
            with anyio.fail_after(10):
                async for _ in follower.updates:
                    if follower.concluded is not None:
                        break
            tg.cancel_scope.cancel()
    assert follower.concluded is not None
    return follower.concluded.verdict


LOADING = b"INFO 12-02 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\nLoading weights took 3.2 seconds\n"


def test_an_oom_killed_container_is_killed_and_the_hint_names_its_limit() -> None:
    """A container the kernel killed at its memory limit, with no last words, is crashed / killed, the limit named."""
    ended = Ended("OOMKilled, exit code 137", exit_code=137, oom_killed=True, memory_limit=8 << 30)
    verdict = anyio.run(_ended, LOADING, ended)
    assert verdict.state.value == "crashed"
    assert verdict.error is not None
    assert verdict.error.category == "killed"
    assert "8 GiB (8589934592 bytes" in (verdict.error.hint or "")
    assert "OOMKilled" in verdict.error.summary


def test_a_container_that_exits_while_writing_a_traceback_crashed_of_it_not_killed() -> None:
    """A container that exits (code 1) with its log inside a traceback cut before its exception line: the cut
    traceback is the crash, as `replay` of the log says, not a kill (the stream's end closes it first)."""
    log = CORPUS / "trtllm" / "trtllm-cuda-graph-warmup-traceback-cut-before-exception-exaone-issue8802.log"
    _, replayed = replay_path(log)
    assert replayed.error is not None
    verdict = anyio.run(lambda: _ended(log.read_bytes(), Ended("exited with code 1", exit_code=1), live=True))
    assert verdict.error is not None
    assert (verdict.state, verdict.phase, verdict.error.category) == (
        replayed.state,
        replayed.phase,
        replayed.error.category,
    )
    assert verdict.error.category == "other"


def test_a_container_that_exits_zero_has_stopped() -> None:
    """A process the platform saw exit with status 0, with no error pending, stopped (an intended end)."""
    verdict = anyio.run(_ended, LOADING, Ended("exited with code 0", exit_code=0))
    assert verdict.state.value == "stopped"


def test_a_container_that_exits_non_zero_without_a_word_is_killed() -> None:
    """A non-zero exit with nothing in the log to say why is crashed / killed, the exit in the summary."""
    verdict = anyio.run(_ended, LOADING, Ended("exited with code 139", exit_code=139))
    assert verdict.state.value == "crashed"
    assert verdict.error is not None
    assert verdict.error.category == "killed"
    assert "139" in verdict.error.summary
