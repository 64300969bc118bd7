"""Tests for the streaming script run on a followed host (`watchdog.follow.sources.remote.STREAM_SCRIPT`), run here
with the machine's own /bin/sh and GNU tail, so the stat loop's status lines can be read one by one.

The stat interval is 60 s in every test: whatever is said within seconds of a change after `W` was woken
by the change itself (the path followed by name), not by the loop looking again. Each test runs with each
`sh` a host may have (the script runs under the host's `sh`): dash (Debian, Ubuntu), bash (RHEL), BusyBox
ash (Alpine), those installed here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from sshd_server import assert_no_reader_left, readers_of, wait_gone

from watchdog.follow.sources.remote import (
    Header,
    StatLine,
    parse_header,
    parse_process_line,
    parse_stat_line,
    poll_command,
    stream_command,
)

pytestmark = pytest.mark.anyio

SLOW = 60.0  # the stat interval: far longer than any wait below


def _gnu_tail() -> bool:
    if shutil.which("tail") is None:
        return False
    out = subprocess.run(["tail", "--version"], capture_output=True, text=True, check=False)
    return "GNU" in out.stdout


if not _gnu_tail():
    pytest.skip("the streaming script needs GNU tail (coreutils)", allow_module_level=True)


@dataclass
class Reader:
    """A running stream script: its process and its two outputs, line by line."""

    process: Process
    out: BufferedByteReceiveStream
    err: BufferedByteReceiveStream
    said: tuple[int, int] | None = None  # its `P` line: the script's process and process group

    async def status(self) -> bytes:
        """The next status line on stderr (without its newline), past the `P` line (kept in `said`)."""
        with anyio.fail_after(10):
            while True:
                line = await self.err.receive_until(b"\n", 4096)
                process = parse_process_line(line)
                if process is None:
                    return line
                self.said = process

    async def stat(self) -> StatLine:
        """The next stat sample on stderr."""
        line = await self.status()
        stat = parse_stat_line(line)
        assert stat is not None, f"{line!r} is not a stat sample"
        return stat

    async def header(self) -> Header:
        """The header line on stdout."""
        with anyio.fail_after(10):
            header = parse_header(await self.out.receive_until(b"\n", 4096))
        assert header is not None
        return header

    def reading_tail(self) -> int:
        """The pid of the tail that reads the open file (`tail ... /dev/fd/3`), among the script's processes."""
        todo = [self.process.pid]
        while todo:
            pid = todo.pop()
            try:  # the stat loop's `stat` and `sleep` come and go
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            if argv[0] == b"tail" and b"/dev/fd/3" in argv:
                return pid
            todo += [int(child) for child in children]
        raise AssertionError("no reading tail among the script's processes")


_SHELLS = {"dash": ["dash"], "bash": ["bash"], "busybox": ["busybox", "sh"]}


@pytest.fixture(params=sorted(_SHELLS))
def sh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose `sh` (as `stream_command` calls it) is the shell of the parameter."""
    argv = _SHELLS[request.param]
    found = shutil.which(argv[0])
    if found is None:
        pytest.skip(f"{argv[0]} is not installed here")
    folder = tmp_path_factory.mktemp(f"sh-{request.param}")
    wrapper = folder / "sh"
    # a symlink for bash (named sh, it runs in POSIX mode, as /bin/sh on RHEL), a wrapper for busybox
    if request.param == "busybox":
        wrapper.write_text(f'#!/bin/sh\nexec {found} sh "$@"\n')
        wrapper.chmod(0o755)
    else:
        wrapper.symlink_to(found)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


@asynccontextmanager
async def stream(
    path: Path, env: dict[str, str], previous: tuple[int, int] | None = None
) -> AsyncIterator[Reader]:
    """Run the stream script on `path` from offset 0 (with `env`'s `sh`), past its header, first sample and `W`;
    in a session of its own, as sshd starts a command. `previous`: as for `stream_command`."""
    command = stream_command(str(path), 0, stat_interval=SLOW, tail_interval=0.01, previous=previous)
    async with await anyio.open_process(command, env=env, start_new_session=True) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        reader = Reader(
            process, BufferedByteReceiveStream(process.stdout), BufferedByteReceiveStream(process.stderr)
        )
        try:
            header = await reader.header()
            first = await reader.stat()
            assert (first.inode, first.path_inode) == (header.inode, header.inode)
            assert await reader.status() == b"W"
            yield reader
        finally:
            if process.returncode is None:
                process.kill()


async def test_a_rotation_after_the_first_second_is_said_at_once(tmp_path: Path, sh: dict[str, str]) -> None:
    """A rotation after `W`: a sample naming the new file comes within seconds, not at the stat interval.

    The rotation is made so that the path always names a file (a link, then a rename over the path): between a
    rename and a create, a sample would rightly find nothing there, and the next comes only at the stat
    interval (`SLOW` here; 0.25 s by default)."""
    log = tmp_path / "rot.log"
    log.write_bytes(b"old\n")
    new = tmp_path / "rot.log.new"
    new.write_bytes(b"new\n")
    async with stream(log, sh) as reader:
        old_inode = log.stat().st_ino
        os.link(log, tmp_path / "rot.log.1")
        os.replace(new, log)
        stat = await reader.stat()
        # a sample between the two steps: the path still names the old file
        while stat.path_inode == old_inode:
            stat = await reader.stat()
        assert stat.path_inode == log.stat().st_ino
        assert stat.inode == old_inode
        assert stat.links == 1


async def test_a_deleted_path_is_said_at_once(tmp_path: Path, sh: dict[str, str]) -> None:
    """Unlinking the log after `W` gives a sample of the open file with no links and nothing at the path."""
    log = tmp_path / "gone.log"
    log.write_bytes(b"x\n")
    async with stream(log, sh) as reader:
        inode = log.stat().st_ino
        log.unlink()
        stat = await reader.stat()
        assert (stat.inode, stat.links, stat.path_inode) == (inode, 0, None)


async def test_a_reading_tail_that_dies_is_said_with_e(tmp_path: Path, sh: dict[str, str]) -> None:
    """If the reading tail is killed on the host, the script says E and ends, while stdin is still open."""
    log = tmp_path / "killed.log"
    log.write_bytes(b"x\n")
    async with stream(log, sh) as reader:
        os.kill(reader.reading_tail(), signal.SIGTERM)
        assert await reader.status() == b"E"
        with anyio.fail_after(10):
            await reader.process.wait()
    await assert_no_reader_left(log)


async def test_closing_stdin_leaves_no_process_behind(tmp_path: Path, sh: dict[str, str]) -> None:
    """Closing stdin (the channel closing) ends the script, both tails and the stat loop, within seconds."""
    log = tmp_path / "closed.log"
    log.write_bytes(b"x\n")
    async with stream(log, sh) as reader:
        assert reader.process.stdin is not None
        await reader.process.stdin.aclose()
        with anyio.fail_after(10):
            await reader.process.wait()
    await assert_no_reader_left(log)


async def test_the_next_reader_ends_the_one_before_whose_stdin_never_closed(
    tmp_path: Path, sh: dict[str, str]
) -> None:
    """A reader whose channel was cut where sshd did not see it (its stdin stays open) says its process group;
    the follower's next reader, given it, ends that whole group (script, both tails, stat loop, cat)."""
    log = tmp_path / "cut.log"
    log.write_bytes(b"x\n")
    async with stream(log, sh) as old:
        assert old.said is not None
        pid, group = old.said
        assert group == old.process.pid  # the session's leader, as under sshd
        left = readers_of(str(log))
        assert pid in left
        async with stream(log, sh, previous=old.said) as new:
            assert new.said is not None
            assert new.said[1] != group
            await wait_gone(left)
            with anyio.fail_after(10):
                await old.process.wait()
            assert readers_of(str(log)).isdisjoint(left)
            assert new.process.returncode is None


@pytest.mark.parametrize("script", ["stream", "poll"])
async def test_the_header_says_the_file_s_age_by_the_host_s_clock(
    tmp_path: Path, sh: dict[str, str], script: str
) -> None:
    """`ok INODE SIZE DEV AGE`: AGE is the host's time less the file's modification time, in whole seconds, under
    each shell (the quiet-log rule reads it: `watchdog.follow.sources.base.Aged`)."""
    log = tmp_path / "server.log"
    log.write_bytes(b"a line\n")
    ago = os.stat(log).st_mtime - 300.0
    os.utime(log, (ago, ago))
    if script == "stream":
        command = stream_command(str(log), 0, stat_interval=SLOW, tail_interval=0.01)
    else:
        command = poll_command(str(log), 0, max_bytes=4096)
    async with await anyio.open_process(command, env=sh, start_new_session=True) as process:
        assert process.stdout is not None
        try:
            with anyio.fail_after(10):
                line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
        finally:
            if process.returncode is None:
                process.kill()
    header = parse_header(line)
    assert header is not None, line
    st = os.stat(log)
    assert (header.inode, header.size, header.device) == (st.st_ino, st.st_size, st.st_dev)
    assert header.age is not None
    assert 299 <= header.age <= 330


def test_a_header_of_an_older_reader_has_no_age() -> None:
    """A forced-command wrapper of an older release sends `ok INODE SIZE [DEV]`: read, with no age."""
    assert parse_header(b"ok 12 345 67") == Header("ok", 12, 345, 67, None)
    assert parse_header(b"ok 12 345") == Header("ok", 12, 345, None, None)
    assert parse_header(b"ok 12 345 67 -2") == Header("ok", 12, 345, 67, -2)
    assert parse_header(b"ok 12 345 67 x") is None
