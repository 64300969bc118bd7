"""A log already quiet when first read: its quiet counts towards the crash grace (`watchdog.follow.sources.base.Aged`).

A launch that died before the follower started (`watchdog watch server.log` minutes later, a daemon started or
restarted after the death) left an error pending at the log's end: had the log been followed as it was written,
`crash_grace` of quiet would have made it a crash long ago. The file's modification time says how long it has
been quiet; the grace counts from then, not from the first read.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest
from sshd_server import SSHDServer

from watchdog.core.analyzer import Analyzer
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec
from watchdog.follow.sources import Aged, LocalSource, parse_target
from watchdog.follow.sources.base import CaughtUp, Chunk
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.testing import ManualClock
from watchdog.profiles.loader import load_engine
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
# an excerpt whose traceback is cut before its exception: a crash only once the log stays quiet
CUT = CORPUS / "vllm" / "vllm-v1-2025-torch-compile-backend-frames-only-traceback-cut-14121.log"
T = TypeVar("T")
GRACE = 600.0  # far longer than any deadline below: a verdict within one counted the file's quiet


def _read(quiet_for: float) -> Analyzer:
    analyzer = Analyzer(load_engine(None, ()), crash_grace=5.0)
    analyzer.feed(CUT.read_bytes(), 100.0)
    analyzer.caught_up(100.0, quiet_for=quiet_for)
    return analyzer


async def _concluded(follower: LaunchFollower, then: Callable[[], T]) -> tuple[Concluded, T]:
    """Run `follower` until it concludes (within 30 s); its conclusion and what `then` says at that moment."""
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with follower.updates:
                async for update in follower.updates:
                    if isinstance(update, Concluded):
                        break
            said = then()
            tg.cancel_scope.cancel()
    return update, said


def test_a_quiet_longer_than_the_grace_makes_the_pending_error_a_crash_at_once() -> None:
    analyzer = _read(quiet_for=60.0)
    analyzer.tick(100.0)
    assert analyzer.state == State.CRASHED


@pytest.mark.parametrize(("quiet_for", "due"), [(0.0, 105.0), (3.0, 102.0)])
def test_a_shorter_quiet_counts_for_its_part_of_the_grace(quiet_for: float, due: float) -> None:
    """A log that just grew waits the whole grace from its read; one quiet a while, the rest of it."""
    analyzer = _read(quiet_for=quiet_for)
    analyzer.tick(due - 0.1)
    assert analyzer.state != State.CRASHED
    analyzer.tick(due)
    assert analyzer.state == State.CRASHED


def test_a_local_file_tells_how_long_it_has_not_been_modified(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x\n")
    now = time.time()
    os.utime(log, (now - 120.0, now - 120.0))
    source = LocalSource(log)
    assert isinstance(source, Aged)
    age = source.unmodified_for()
    assert age is not None
    assert 119.0 <= age <= 180.0
    os.utime(log, (now + 3600.0, now + 3600.0))  # modified "in the future": a clock set back
    assert source.unmodified_for() == 0.0
    assert LocalSource(tmp_path / "missing.log").unmodified_for() is None


async def test_a_launch_that_died_before_the_follower_started_is_said_crashed_without_the_grace(
    tmp_path: Path,
) -> None:
    """A real file whose last write was ten minutes ago, followed with a ten-minute grace: the crash is said as
    soon as the log is read (the grace ran out while nobody followed), not ten minutes later."""
    log = tmp_path / "server.log"
    shutil.copy(CUT, log)
    ago = time.time() - GRACE
    os.utime(log, (ago, ago))
    spec = LaunchSpec(name="t", target=parse_target(str(log)), crash_grace=GRACE)
    update, _ = await _concluded(LaunchFollower(spec, source=LocalSource(log)), lambda: None)
    assert update.state == State.CRASHED
    assert update.verdict.error is not None
    assert "traceback cut before its exception" in update.verdict.error.summary


async def test_an_early_ready_line_of_a_quiet_log_has_waited_for_its_confirmation_already(
    tmp_path: Path,
) -> None:
    """vLLM's API server's log ending at its routes (no Uvicorn line: its stderr not in the file), last written ten
    minutes ago: the ready verdict comes as the log is read, its wait for Uvicorn's line (READY_CONFIRM_DUE) over
    while nobody followed. The follower's clock never moves here: only the file's age can end the wait."""
    log = tmp_path / "server.log"
    shutil.copy(CORPUS / "vllm" / "vllm-v1-ready-routes-dev-mode-pr30749.log", log)
    ago = time.time() - GRACE
    os.utime(log, (ago, ago))
    spec = LaunchSpec(name="t", target=parse_target(str(log)))
    follower = LaunchFollower(spec, source=LocalSource(log), clock=ManualClock())
    update, _ = await _concluded(follower, lambda: None)
    assert update.state == State.READY


@pytest.fixture
async def pool(ssh_options: SSHOptions, anyio_backend: str) -> AsyncIterator[SSHPool]:
    async with SSHPool(ssh_options) as pool:
        yield pool


@pytest.mark.sshd
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "polled"])
async def test_a_log_over_ssh_tells_its_age_from_the_host(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool
) -> None:
    """The remote reader's header gives the file's age by the host's clock: a launch that died ten minutes before
    `watch host:log` is said crashed as soon as the log is read, with a ten-minute grace."""
    log = tmp_path / "server.log"
    shutil.copy(CUT, log)
    ago = time.time() - GRACE
    os.utime(log, (ago, ago))
    source = SSHSource(
        pool, sshd.host, str(log), port=sshd.port, user=sshd.user, stream=stream, poll_interval=0.05
    )
    assert isinstance(source, Aged)
    assert source.unmodified_for() is None  # nothing read yet
    spec = LaunchSpec(name="t", target=parse_target(f"{sshd.host}:{log}"), crash_grace=GRACE)
    update, age = await _concluded(LaunchFollower(spec, source=source), source.unmodified_for)
    assert update.state == State.CRASHED
    assert age is not None
    assert GRACE - 2.0 <= age <= GRACE + 60.0


@pytest.mark.sshd
async def test_a_log_over_ssh_that_grew_since_its_header_is_not_quiet(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """Bytes read past the size the header gave: the file grew after it was opened, so its age is 0, not the
    header's."""
    log = tmp_path / "server.log"
    log.write_bytes(b"first\n")
    ago = time.time() - GRACE
    os.utime(log, (ago, ago))
    source = SSHSource(pool, sshd.host, str(log), port=sshd.port, user=sshd.user, stream=True)
    async with source.open_follow() as items:
        with anyio.fail_after(20):
            while not isinstance(await anext(items), CaughtUp):
                pass
            quiet = source.unmodified_for()
            assert quiet is not None
            assert quiet >= GRACE - 2.0
            with log.open("ab") as f:
                f.write(b"second\n")
            while not isinstance(await anext(items), Chunk):
                pass
    assert source.unmodified_for() == 0.0
