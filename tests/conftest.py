"""Shared fixtures: the anyio backend and a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest
from anyio.abc import Process
from hypothesis import settings

# tests/ is not a package: make the sshd helper importable for the fixtures and the tests.
sys.path.insert(0, str(Path(__file__).parent))

from children import descendants, end
from docker_daemon import DockerDaemon, DockerUnavailable, running_dockerd
from http_receiver import Receiver, running_receiver
from journald_server import JournaldUnavailable, ensure_journald
from sshd_server import SSHDServer, SSHDUnavailable, running_sshd, start_sshd, stop_sshd

from watchdog.core.prefilter import keep_databases
from watchdog.follow.sources.sshpool import SSHOptions

TIMEOUT_GRACE = 10.0  # seconds an async test has to end once cancelled for its timeout, before the hard stop

# No wall-clock deadline per example: a property test pins behaviour, not speed (benchmarks/ measure that), and a
# shared CI machine's load made one example of tests/test_lifecycle.py take 610 ms against the default 200 ms
# (hypothesis then calls the test flaky and fails it)
settings.register_profile("watchdog", deadline=None)
settings.load_profile("watchdog")


def pytest_configure(config: pytest.Config) -> None:
    """A test process started with SIGINT ignored (a background job of a shell) takes it back: its children
    (`watchdog watch`, which a test stops with Ctrl-C's signal) inherit the default, not the ignoring."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_CACHE: Path | None = None  # the test process's cache folder (`XDG_CACHE_HOME`), made at its session's start


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every engine's prefilter databases compiled once a test process, before its first test (in no test's time
    or timeout), into the cache folder its tests use: each daemon a test starts (`make_ahead`: 1-2 s of CPU
    compiled, more on a loaded runner) loads them instead."""
    global _CACHE  # noqa: PLW0603 - one folder a test process
    from watchdog.core.analyzer import make_databases  # noqa: PLC0415
    from watchdog.core.detection import EngineDetector  # noqa: PLC0415
    from watchdog.follow.databases import DiskDatabases  # noqa: PLC0415
    from watchdog.profiles.loader import catalogue  # noqa: PLC0415

    _CACHE = Path(tempfile.mkdtemp(prefix="watchdog-test-cache-"))
    keep_databases(DiskDatabases(_CACHE / "watchdog" / "hyperscan"))
    try:
        known = catalogue()
        EngineDetector(known.markers)
        for name in known.names:
            make_databases(known.profile(name))
    finally:
        keep_databases(None)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Nothing a test started outlives the run (an interrupted run's sshd, daemon or watcher); pytest-xdist's
    controller leaves its workers to themselves. The process's cache folder goes."""
    if getattr(config, "workerinput", None) is not None or not config.getoption("numprocesses", None):
        end(descendants())
    if _CACHE is not None:
        shutil.rmtree(_CACHE, ignore_errors=True)


# The files that take longest (pytest --durations, summed per file, on 4 pytest-xdist workers): run first, so
# that a worker does not start one of them when the others are nearly done.
SLOW_FIRST = (
    "test_coexistence.py", "test_container_launches.py", "test_launch.py", "test_daemon.py",
    "test_daemon_faults.py", "test_deploy_kit.py", "test_state_faults.py", "test_sources_ssh.py", "test_watch.py",
    "test_prometheus_scrape.py", "test_wheel_install.py", "test_forced_command.py", "test_ssh_channels.py",
    "test_alerting.py", "test_resume.py",
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first (`SLOW_FIRST`), each file's tests in their order. A test that uses the session's
    sshd (directly or through another fixture) is of the `sshd` tier, marked or not: `-m "not sshd"` leaves
    out every test over a real sshd."""
    rank = {name: n for n, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if "sshd" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.sshd)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """pytest-timeout's signal method, made safe for tests with child processes and for async tests.

    When a test runs past its timeout, the processes it started are ended first (SIGTERM, SIGKILL after a
    deadline), so that nothing it waits for (a pipe, a `wait()`) holds it. A sync test then fails with
    pytest-timeout's message; an async test (anyio) has its runner task cancelled, as anyio does on Ctrl-C
    (raising into the event loop would leave the test's coroutine suspended, to resume in the next test), and
    if it has not ended `TIMEOUT_GRACE` seconds later the run stops as with the thread method.
    """
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's own
    import pytest_timeout  # noqa: PLC0415

    before = descendants()  # a session fixture's sshd is no child of this test

    def hard_stop(signum: int, frame: object) -> None:
        pytest_timeout.timeout_timer(item, settings)

    def handler(signum: int, frame: object) -> None:
        __tracebackhide__ = True
        end(descendants() - before)
        loop = asyncio._get_running_loop()
        runners = [
            task
            for task in (asyncio.all_tasks(loop) if loop is not None else ())
            if task.get_coro().__qualname__.endswith("_run_tests_and_fixtures")  # type: ignore[union-attr]
        ]
        if not runners:
            # a sync test, or one that runs an event loop of its own (`anyio.run`): its failure raised here, as
            # in any sync test (the hard stop below would end the whole worker, and with it the run)
            pytest_timeout.timeout_sigalrm(item, settings)
            return
        pytest_timeout.dump_stacks(item.config.get_terminal_writer())
        why = f"the test ran past its timeout of {settings.timeout} s"
        assert loop is not None
        for task in runners:
            loop.call_soon_threadsafe(task.cancel, why)
        signal.signal(signal.SIGALRM, hard_stop)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT_GRACE)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh needs the asyncio backend."""
    return "asyncio"


@pytest.fixture
async def sleeper(anyio_backend: str) -> AsyncIterator[tuple[Process, str]]:
    """A `sleep` process with a unique command line, and that command line."""
    duration = f"1000.{random.randrange(10**8):08d}"
    async with await anyio.open_process(["sleep", duration]) as process:
        try:
            yield process, f"sleep {duration}"
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP receiver on loopback (tests/http_receiver.py) for one test."""
    async with running_receiver() as state:
        yield state


@pytest.fixture(autouse=True)
def _databases_kept_in_the_runs_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A replay through the CLI keeps the prefilter's compiled databases in the user's cache folder: in a test
    (and the commands it starts) in the test process's own (`pytest_sessionstart`), and no store is left set
    for the next test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_CACHE or tmp_path_factory.getbasetemp() / "xdg-cache"))
    yield
    keep_databases(None)


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A command run in-process (`watch`, `demo`) sets up logging for its process: each test starts with the
    logging every other test has (structlog's configuration, the root logger's handlers and level)."""
    import logging  # noqa: PLC0415

    import structlog  # noqa: PLC0415

    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)


def unavailable(reason: str, require: str = "WATCHDOG_REQUIRE_SSHD") -> NoReturn:
    """Skip for `reason`; fail instead when the environment variable `require` is 1 (CI sets it)."""
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {reason}")
    pytest.skip(reason)


def require_binary(name: str, package: str, require: str) -> str:
    """The path of the program `name` (from Debian's `package`), or `unavailable` without it."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (Debian package `{package}`)", require)
    return path


def sshd_or_skip(directory: Path, extra_config: Sequence[str] = ()) -> Iterator[SSHDServer]:
    """`sshd_server.running_sshd` in `directory` (with `extra_config` lines) as a fixture's body (`yield from`):
    `unavailable` without OpenSSH."""
    try:
        with running_sshd(directory, extra_config=extra_config) as server:
            yield server
    except SSHDUnavailable as exc:
        unavailable(str(exc))


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """A throwaway sshd on 127.0.0.1 with generated host and user keys, for the whole session."""
    yield from sshd_or_skip(tmp_path_factory.mktemp("sshd"))


@pytest.fixture(scope="session")
def journald() -> None:
    """A systemd-journald that `systemd-cat` writes into and `journalctl` reads (started here if none runs)."""
    try:
        ensure_journald()
    except JournaldUnavailable as exc:
        unavailable(str(exc), "WATCHDOG_REQUIRE_JOURNALD")


@pytest.fixture(scope="session")
def dockerd() -> Iterator[DockerDaemon]:
    """A throwaway dockerd (vfs, no network) with a busybox image, for the whole session (one per worker)."""
    try:
        context = running_dockerd()
        daemon = context.__enter__()
    except DockerUnavailable as exc:
        unavailable(str(exc), "WATCHDOG_REQUIRE_DOCKER")
        raise  # unreachable: skip and fail raise
    try:
        yield daemon
    finally:
        context.__exit__(None, None, None)


@pytest.fixture
def docker(dockerd: DockerDaemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[DockerDaemon]:
    """The session's dockerd as this process's DOCKER_HOST (the local source honours it); containers removed."""
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    yield dockerd
    names = dockerd.docker("ps", "-aq").split()
    if names:
        dockerd.docker("rm", "-f", *names, check=False)


@pytest.fixture(scope="session")
def docker_sshd(dockerd: DockerDaemon, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """An sshd whose sessions have DOCKER_HOST set to the test dockerd (sshd_config `SetEnv`), as a host's
    administrator would give the watchdog's account a socket other than the default."""
    try:
        server = start_sshd(
            tmp_path_factory.mktemp("dsshd"), extra_config=[f"SetEnv DOCKER_HOST={dockerd.host}"]
        )
    except SSHDUnavailable as exc:
        unavailable(str(exc))
    try:
        yield server
    finally:
        stop_sshd(server)


def ssh_options_for(server: SSHDServer) -> SSHOptions:
    """Options that reach `server` and nothing else (no agent, no ~/.ssh/config)."""
    return SSHOptions(
        known_hosts=str(server.known_hosts),
        identity=str(server.client_key),
        config=None,
        use_agent=False,
    )


@pytest.fixture
def ssh_options(sshd: SSHDServer) -> SSHOptions:
    """Options that reach the test sshd and nothing else (no agent, no ~/.ssh/config)."""
    return ssh_options_for(sshd)


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A loopback port whose SYNs go unanswered, as a black-holed host's: it listens with backlog 0 and its
    accept queue is full (the kernel then drops new SYNs)."""
    import socket  # noqa: PLC0415

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    probe = socket.socket()
    probe.settimeout(0.5)
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        pass  # dropped: a black hole
    else:
        pytest.skip("the kernel answered a SYN to a full accept queue (tcp_abort_on_overflow?)")
    finally:
        probe.close()
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
