"""deploy/ssh/llm-launch-watchdog-forced-command: it runs every command watchdog sends, and nothing else.

The commands are not copied here: they are captured from watchdog itself (its sources and probes, run
against a recording pool), so a change to any remote script fails these tests until the wrapper's list
of shapes is updated. Then real watchdog flows run through the wrapper, installed as the forced command
of the test key of a real OpenSSH sshd (`restrict,port-forwarding,permitopen=...,command=...`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import anyio
import asyncssh
import pytest
import structlog
from anyio.abc import Process
from conftest import unavailable as _unavailable
from hypothesis import given, settings
from hypothesis import strategies as st
from sshd_server import SSHDServer, SSHDUnavailable, start_sshd, stop_sshd

from watchdog.exceptions import TargetError
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec
from watchdog.follow.probes import process as process_module
from watchdog.follow.probes.gpusampler import HostGpuSampler
from watchdog.follow.probes.health import HealthProbe
from watchdog.follow.probes.process import SSHProcessProbe
from watchdog.follow.sources import mux as mux_module
from watchdog.follow.sources import parse_target
from watchdog.follow.sources.base import CaughtUp, Chunk, Connected, FileMissing, FileRestarted, SourceItem
from watchdog.follow.sources.containerlog import ContainerState, logs_command, parse_inspect, rest_command
from watchdog.follow.sources.docker import ContainerSource
from watchdog.follow.sources.identity import IDENTITY_WINDOW, local_identity
from watchdog.follow.sources.journald import JournaldSource
from watchdog.follow.sources.mux import MUX_NAME, MUX_PROGRAM, start_mux
from watchdog.follow.sources.remote import reader_command, stream_args
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import Target

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[1]
WRAPPER = ROOT / "deploy" / "ssh" / "llm-launch-watchdog-forced-command"
PACKAGE = ROOT / "watchdog"
FIXTURES = Path(__file__).parent / "fixtures"
READY = FIXTURES / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
OOM_STORY = FIXTURES / "stories" / "ep8-oom-logging-noise.log"
REFUSED = 126  # the wrapper's exit status for a command it does not run
DEADLINE = 60.0  # an upper bound for a loaded CI machine; passing runs take a second or two
APPS_MIB = 2048  # what the fake nvidia-smi says the sleeper holds

# Shells a GPU host's /bin/sh may be; the wrapper must parse the same under each one found here.
SHELLS = [name for name in ("dash", "bash", "busybox", "mksh", "yash") if shutil.which(name)]


# -- watchdog's remote commands, captured from watchdog itself ---------------------------------------------


class _Captured(Exception):
    """Raised by the recording pool once it has the command: nothing is ever run."""


class _RecordingPool:
    """Stands in for `SSHPool`: records the command of the first session or run, then stops the caller."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.options = SSHOptions()

    async def connect(self, host: str, **kwargs: Any) -> None:
        """Pretend to connect."""

    async def open_session(self, host: str, factory: Any, command: str, **kwargs: Any) -> None:
        """Record a streaming command."""
        self.commands.append(command)
        raise _Captured

    async def open_reader(self, host: str, name: str, args: list[str], **kwargs: Any) -> None:
        """Record a log reader's command, as `SSHPool.open_reader` sends it in a channel of its own."""
        self.commands.append(reader_command(name, args))
        raise _Captured

    async def run(self, host: str, command: str, **kwargs: Any) -> None:
        """Record a one-shot command."""
        self.commands.append(command)
        raise _Captured


async def _drain_follow(source: SSHSource | JournaldSource) -> None:
    async with source.open_follow(0) as items:
        async for _ in items:
            pass


async def _next_sample(sampler: HostGpuSampler) -> None:
    with sampler.subscribe(pattern="vllm serve") as feed:
        await feed.__anext__()


async def _next_host_sample(sampler: HostGpuSampler) -> None:
    with sampler.subscribe_host() as feed:
        await feed.__anext__()


def _container(pool: SSHPool, name: str) -> ContainerSource:
    return ContainerSource(name, pool=pool, target=parse_target(f"docker://gpu/{name}"))


async def _container_logs(pool: SSHPool, name: str, since: tuple[int, int] | None) -> None:
    # the reader's command as the source sends it when it (re)opens a container's log
    async with _container(pool, name).runner.open(logs_command("docker", name, since)):
        pass


async def _container_rest(pool: SSHPool, name: str) -> None:
    # the reader's command for the rest of a run its restart policy ended while the watchdog was down
    async with _container(pool, name).runner.open(
        rest_command("docker", name, (1796405829, 5), (1796405900, 0))
    ):
        pass


# a container's run as `inspect` says it: what the events commands are asked about
_STATE = cast(
    ContainerState,
    parse_inspect(
        b'[{"Id": "0123abcd", "Name": "/vllm", "State": {"Running": false, "Restarting": false, "OOMKilled": false,'
        b' "ExitCode": 137, "StartedAt": "2026-12-04T17:37:09.000000005Z", "FinishedAt": "2026-12-04T17:38:09Z",'
        b' "Status": "exited", "Error": ""}, "RestartCount": 0, "HostConfig": {"Memory": 0}}]'
    ),
)


Action = Callable[[SSHPool], Awaitable[object]]
# (the shape's name in the wrapper, how watchdog is made to send it); paths with a quote and a space
ACTIONS: list[tuple[str, Action]] = [
    (
        "watchdog-follow",
        lambda pool: _drain_follow(SSHSource(pool, "gpu", "/var/log/it's a log", stream=True)),
    ),
    ("watchdog-mux", lambda pool: start_mux(pool, "gpu")),
    ("watchdog-poll", lambda pool: _drain_follow(SSHSource(pool, "gpu", "logs/server.log", stream=False))),
    ("watchdog-identify", lambda pool: SSHSource(pool, "gpu", "/var/log/vllm.log").identify(123_456)),
    ("watchdog-pid", lambda pool: SSHProcessProbe(pool, "gpu", pid=4242).alive()),
    ("watchdog-pidfile", lambda pool: SSHProcessProbe(pool, "gpu", pid_file="/run/vllm 1.pid").alive()),
    ("watchdog-pgrep", lambda pool: SSHProcessProbe(pool, "gpu", pattern="vllm serve").alive()),
    ("watchdog-gpu", lambda pool: _next_sample(HostGpuSampler(pool=pool, host="gpu"))),
    ("nvidia-smi", lambda pool: _next_host_sample(HostGpuSampler(pool=pool, host="gpu"))),
    (
        "watchdog-journal",
        lambda pool: _drain_follow(JournaldSource("identifier=it's vllm", pool=pool, host="gpu")),
    ),
    ("watchdog-unit", lambda pool: JournaldSource("vllm serve.service", pool=pool, host="gpu").unit_state()),
    ("watchdog-container-inspect", lambda pool: _container(pool, "it's vllm").inspect()),
    ("watchdog-container-logs", lambda pool: _container_logs(pool, "it's vllm", (1796405829, 5))),
    ("watchdog-container-rest", lambda pool: _container_rest(pool, "it's vllm")),
    ("watchdog-container-oom", lambda pool: _container(pool, "vllm").oom_recorded(_STATE)),
    ("watchdog-container-end", lambda pool: _container(pool, "vllm").recorded_end(_STATE, (1796405900, 0))),
]


async def _capture(action: Action) -> str:
    pool = _RecordingPool()
    try:
        await action(cast(SSHPool, pool))
    except* _Captured:
        pass
    assert len(pool.commands) == 1, pool.commands
    return pool.commands[0]


def test_a_host_s_stat_interval_reaches_its_remote_readers() -> None:
    """The stat interval of a host's options (`[hosts.NAME] stat_interval`) is the one its stream scripts use."""

    async def capture() -> str:
        pool = _RecordingPool()
        pool.options = SSHOptions(stat_interval=2.0)
        with contextlib.suppress(_Captured):
            await _drain_follow(SSHSource(cast(SSHPool, pool), "gpu", "logs/x.log", stream=True))
        [command] = pool.commands
        return command

    argv = shlex.split(anyio.run(capture, backend="asyncio"))
    assert argv[-4:] == ["2.000", "0.010", "0", "0"]  # stat interval, tail interval, no reader before


def stream_args_hex(path: str) -> str:
    """The arguments a follower of `path` from its start gives its reader, hex-encoded as the multiplexer takes them."""
    args = stream_args(path, 0, stat_interval=0.25, tail_interval=0.01)
    return " ".join(arg.encode().hex() for arg in args)


def _captured_commands() -> dict[str, str]:
    async def capture_all() -> dict[str, str]:
        return {name: await _capture(action) for name, action in ACTIONS}

    return anyio.run(capture_all, backend="asyncio")


COMMANDS = _captured_commands()
# the pid file command without its argument: `sh -c '...' watchdog-pidfile `
PIDFILE_PREFIX = COMMANDS["watchdog-pidfile"].removesuffix(shlex.quote("/run/vllm 1.pid"))


def _check(command: str | None, shell: str = "sh") -> subprocess.CompletedProcess[bytes]:
    """Run the wrapper in --check mode for `command` as sshd would set it (None: no command at all)."""
    env = {key: value for key, value in os.environ.items() if key != "SSH_ORIGINAL_COMMAND"}
    if command is not None:
        env["SSH_ORIGINAL_COMMAND"] = command
    argv = [shell, "sh", str(WRAPPER), "--check"] if shell == "busybox" else [shell, str(WRAPPER), "--check"]
    return subprocess.run(argv, env=env, capture_output=True, check=False)


def _argv(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.endswith(b"\0")
    return [arg.decode() for arg in result.stdout[:-1].split(b"\0")]


def _expected_argv(command: str) -> list[str]:
    """What should run: the words of watchdog's command, with `sh` pinned to /bin/sh."""
    words = shlex.split(command)
    return ["/bin/sh", *words[1:]] if words[0] == "sh" else words


def _assert_refused(result: subprocess.CompletedProcess[bytes], why: str = "") -> None:
    assert result.returncode == REFUSED, result
    assert result.stdout == b""
    assert result.stderr.startswith(b"llm-launch-watchdog-forced-command: refused: "), result.stderr
    assert why.encode() in result.stderr


# -- the wrapper on its own --------------------------------------------------------------------------------


def test_wrapper_is_an_executable_posix_script() -> None:
    """The wrapper is executable, starts with #!/bin/sh and parses under `sh -n`."""
    assert os.access(WRAPPER, os.X_OK), f"chmod 755 {WRAPPER}: sshd runs it by its path"
    assert WRAPPER.read_text().startswith("#!/bin/sh\n")
    assert subprocess.run(["sh", "-n", str(WRAPPER)], capture_output=True, check=False).returncode == 0


def test_every_shape_in_the_wrapper_is_a_command_watchdog_sends() -> None:
    """The wrapper lists exactly the shapes captured from watchdog: none missing, none left over."""
    text = WRAPPER.read_text()
    names = set(re.findall(r"^allow(?:_python)? (watchdog-[a-z-]+) ", text, re.MULTILINE))
    exact = re.findall(r"^allow_exact '([^']*)'$", text, re.MULTILINE)
    assert names | {shlex.split(line)[0] for line in exact} == set(COMMANDS)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_watchdog_sends_is_accepted(name: str, shell: str) -> None:
    """Each command watchdog sends is accepted and would run with exactly the words watchdog quoted."""
    command = COMMANDS[name]
    result = _check(command, shell)
    if result.returncode != 0:
        words = shlex.split(command)
        body = words[2] if words[0] in ("sh", "python3") else command
        pytest.fail(f"the wrapper refuses {name}: update its block to this body:\n{body}\n{result.stderr!r}")
    assert _argv(result) == _expected_argv(command)


def _altered(command: str) -> list[str]:
    """Near misses of a command: its script changed by one line, its name changed, an argument added."""
    words = shlex.split(command)
    if words[0] == "python3":
        body, name = words[2], words[3]
        return [
            shlex.join(["python3", "-c", body + "import os\n", name]),
            shlex.join(["python3", "-c", body.replace("\n", "\nimport os\n", 1), name]),
            shlex.join(["python3", "-c", body, "watchdog-follow"]),
            shlex.join(["python3", "-c", body, name, "1"]),
            shlex.join(["python3", "-i", body, name]),
            shlex.join(["python", "-c", body, name]),
            command + "\nid",
            command + " ; id",
        ]
    if words[0] != "sh":
        return [command + " --loop=1", command.replace("--format=csv", "--format=xml"), command + "; id"]
    body, name, args = words[2], words[3], words[4:]
    others = [other for other in ("watchdog-pid", "watchdog-poll") if other != name]
    return [
        shlex.join(["sh", "-c", body + "id\n", name, *args]),
        shlex.join(["sh", "-c", body.replace("\n", "\nid\n", 1), name, *args]),
        shlex.join(["sh", "-c", body, others[0], *args]),
        shlex.join(["sh", "-c", body, name, *args, "1"]),
        shlex.join(["bash", "-c", body, name, *args]),
        command + "\nid",
        command + " ; id",
    ]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_altered_commands_are_refused(name: str) -> None:
    """A command one change away from watchdog's (script, name, one more argument, a second command) is refused."""
    for command in _altered(COMMANDS[name]):
        _assert_refused(_check(command))


@pytest.mark.parametrize(
    ("command", "why"),
    [
        pytest.param(None, "no command", id="login-shell"),
        pytest.param("", "no command", id="empty"),
        pytest.param("id", "not a command of watchdog's", id="id"),
        pytest.param("cat /etc/passwd", "not a command of watchdog's", id="cat"),
        pytest.param("internal-sftp", "not a command of watchdog's", id="sftp"),
        pytest.param("sh -c 'id' watchdog-pid 1", "not a command of watchdog's", id="own-script"),
        pytest.param(
            COMMANDS["watchdog-pid"].replace(" 4242", " '1;id'"), "must be an integer", id="pid-text"
        ),
        pytest.param(
            COMMANDS["watchdog-pid"].replace(" 4242", " -1"), "must be an integer", id="pid-negative"
        ),
        pytest.param(
            COMMANDS["watchdog-pid"].replace(" 4242", ""), "argument 1 is not one", id="pid-missing"
        ),
        pytest.param(
            COMMANDS["watchdog-poll"].replace(" 1048576", ""), "argument 3 is missing", id="poll-short"
        ),
        pytest.param(COMMANDS["watchdog-follow"].replace(" 0.250 ", " 1e3 "), "decimal", id="dec-exponent"),
        pytest.param(COMMANDS["watchdog-follow"].replace(" 0.250 ", " 0.2.5 "), "decimal", id="dec-two-dots"),
        pytest.param(PIDFILE_PREFIX + "'/run/a\nb'", "newline", id="nl"),
        pytest.param(PIDFILE_PREFIX + '"$(id)"', "one shell word", id="dq"),
        pytest.param(PIDFILE_PREFIX + "`id`", "one shell word", id="bq"),
        pytest.param(PIDFILE_PREFIX + "'open", "one shell word", id="open-q"),
        pytest.param(PIDFILE_PREFIX + "'a''b'", "more followed", id="qq"),
        pytest.param(COMMANDS["watchdog-pidfile"] + "  ", "more followed", id="trailing-space"),
        pytest.param(
            COMMANDS["watchdog-pidfile"].replace(" '/run", "  '/run"), "not one shell word", id="two-spaces"
        ),
    ],
)
def test_malformed_commands_are_refused_with_the_reason(command: str | None, why: str) -> None:
    """A command that is not watchdog's, or whose arguments are not what watchdog quotes, is refused and says why."""
    _assert_refused(_check(command), why)


_PATHS = st.text(st.characters(blacklist_characters="\n\0", blacklist_categories=["Cs"]), min_size=1)


@settings(max_examples=40, deadline=None)
@given(path=_PATHS, offset=st.integers(0, 10**12))
def test_any_path_reaches_the_script_as_the_same_argument(path: str, offset: int) -> None:
    """Whatever the path (quotes, `$(...)`, spaces, unicode), the script gets it back unchanged, as data."""
    from watchdog.follow.sources.remote import identity_command  # noqa: PLC0415

    command = identity_command(path, offset, window=IDENTITY_WINDOW)
    for shell in SHELLS:
        assert _argv(_check(command, shell)) == _expected_argv(command), shell


def test_the_remote_call_sites_are_the_ones_the_wrapper_knows() -> None:
    """Every place watchdog runs a remote command or opens a channel is one of those captured above."""
    pattern = re.compile(
        r"\b(?:pool\.(?:run|open_session|open_reader)|conn\.(?:run|create_session|create_process|forward_local_port|"
        r"forward_remote_port|forward_socks|start_sftp_client|create_connection|open_connection))\b"
    )
    sites = Counter(
        f"{path.relative_to(ROOT)}:{match[0]}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for match in pattern.finditer(path.read_text())
    )
    # A new call site is a new remote command (or forward): add its shape to the wrapper and to ACTIONS.
    assert sites == Counter(
        {
            "watchdog/follow/sources/ssh.py:pool.run": 1,  # poll
            # stream and identity (each its own channel, or through the mux)
            "watchdog/follow/sources/ssh.py:pool.open_reader": 2,
            "watchdog/follow/sources/mux.py:pool.open_session": 1,  # the mux
            # journal, unit, container logs and inspect
            "watchdog/follow/sources/commands.py:pool.open_session": 1,
            "watchdog/follow/probes/process.py:pool.run": 1,  # pid, pidfile, pgrep
            "watchdog/follow/probes/gpusampler.py:pool.run": 1,  # gpu sampler, host-wide nvidia-smi
            "watchdog/follow/sources/sshpool.py:conn.run": 1,  # the pool carries them all
            "watchdog/follow/sources/sshpool.py:conn.create_session": 1,
            "watchdog/follow/probes/health.py:conn.open_connection": 1,  # the permitopen= port
        }
    )


def test_injected_text_runs_when_a_shell_evaluates_it(tmp_path: Path) -> None:
    """Control for the injection tests: the hostile strings used there do run commands when evaluated."""
    for command in _injections(tmp_path / "pwned"):
        subprocess.run(["sh", "-c", command], capture_output=True, check=False)
        assert (tmp_path / "pwned").exists(), command
        (tmp_path / "pwned").unlink()


def _hostile_paths(mark: Path) -> list[str]:
    return [
        f"{mark.parent}/$(touch {mark})",
        f"{mark.parent}/x; touch {mark}",
        f"{mark.parent}/`touch {mark}`",
    ]


def _injections(mark: Path) -> list[str]:
    """Hand-made commands that would create `mark` if any part of them were evaluated by a shell."""
    pid = COMMANDS["watchdog-pid"]
    return [
        f"{pid}; touch {mark}",
        # a pid past the kernel's largest (2**22): never alive, so the `||` runs whatever else runs on the host
        f"{pid.replace(' 4242', ' 4194305')} || touch {mark}",
        f"{pid}\ntouch {mark}",
        pid.replace(" 4242", f" $(touch {mark})"),
        pid.replace(" 4242", f" 1`touch {mark}`"),
        f'{PIDFILE_PREFIX}"$(touch {mark})"',
        f"{PIDFILE_PREFIX}'x' ; touch {mark}",
        f"sh -c 'touch {mark}' watchdog-pid 1",
    ]


# -- through a real sshd that forces the wrapper ------------------------------------------------------------


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


def _serve(server: ThreadingHTTPServer) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def health_port() -> Iterator[int]:
    """A real HTTP server on 127.0.0.1: the port the key's permitopen= allows."""
    yield from _serve(ThreadingHTTPServer(("127.0.0.1", 0), _Health))


@pytest.fixture(scope="module")
def other_port() -> Iterator[int]:
    """Another real HTTP server on 127.0.0.1, which permitopen= does not allow."""
    yield from _serve(ThreadingHTTPServer(("127.0.0.1", 0), _Health))


@dataclass
class GpuHost:
    """A fake nvidia-smi on the sessions' PATH; what it prints comes from files the test writes."""

    bin: Path
    gpu_csv: Path
    apps_csv: Path


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory: pytest.TempPathFactory) -> GpuHost:
    """An nvidia-smi that answers the two queries watchdog makes, and fails any other."""
    root = tmp_path_factory.mktemp("gpu-host")
    host = GpuHost(root / "bin", root / "gpu.csv", root / "apps.csv")
    host.bin.mkdir()
    shutil.copy(FIXTURES / "gpu" / "query-40g.csv", host.gpu_csv)
    host.apps_csv.write_text("")
    smi = host.bin / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'case "$1 $2 $#" in\n'
        f"  '--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,"
        f"power.draw --format=csv,noheader,nounits 2') cat {host.gpu_csv};;\n"
        f"  '--query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2') "
        f"cat {host.apps_csv};;\n"
        "  *) echo 'unexpected arguments' >&2; exit 9;;\n"
        "esac\n"
    )
    smi.chmod(0o755)
    return host


# What docs/least-privilege.md puts in the watchdog user's Match block (Match itself cannot go here).
SSHD_CONFIG = ["AllowTcpForwarding local", "AllowStreamLocalForwarding no", "PermitTunnel no"]


def key_options(health_port: int) -> str:
    """The authorized_keys options of the test key: those docs/least-privilege.md recommends."""
    return f'restrict,port-forwarding,permitopen="127.0.0.1:{health_port}",command="{WRAPPER}"'


@pytest.fixture(scope="module")
def restricted(
    tmp_path_factory: pytest.TempPathFactory, health_port: int, gpu_host: GpuHost
) -> Iterator[SSHDServer]:
    """A real sshd whose only key is restricted to the wrapper (and a forward to the health port)."""
    try:
        server = start_sshd(
            tmp_path_factory.mktemp("sshd-forced"),
            extra_config=[*SSHD_CONFIG, f"SetEnv PATH={gpu_host.bin}:/usr/bin:/bin"],
        )
    except SSHDUnavailable as exc:
        _unavailable(str(exc))
        raise  # unreachable: skip and fail raise
    try:
        keys = server.workdir / "authorized_keys"
        keys.write_text(f"{key_options(health_port)} {keys.read_text().strip()}\n")
        yield server
    finally:
        stop_sshd(server)


def _options(server: SSHDServer) -> SSHOptions:
    return SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )


@pytest.fixture
async def pool(restricted: SSHDServer) -> AsyncIterator[SSHPool]:
    """A pool of connections to the restricted sshd."""
    async with SSHPool(_options(restricted)) as pool:
        yield pool


async def _connect(server: SSHDServer) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect(
        server.host,
        port=server.port,
        username=server.user,
        client_keys=[str(server.client_key)],
        known_hosts=str(server.known_hosts),
        agent_path=None,
        config=None,
    )


@pytest.mark.sshd
async def test_launch_follows_a_growing_log_to_its_verdict(
    restricted: SSHDServer, pool: SSHPool, sleeper: tuple[Process, str], health_port: int, tmp_path: Path
) -> None:
    """A launch with a pid file, a health URL and GPU sampling follows lines appended over SSH to a crash verdict."""
    process, _ = sleeper
    log, pid_file = tmp_path / "server.log", tmp_path / "server.pid"
    pid_file.write_text(f"{process.pid}\n")
    text = OOM_STORY.read_bytes()
    half = text.index(b"Load weight end")
    log.write_bytes(text[:half])
    spec = LaunchSpec(
        name="forced",
        target=Target(host=restricted.host, user=restricted.user, port=restricted.port, path=str(log)),
        pid_file=str(pid_file),
        health_url=f"http://127.0.0.1:{health_port}/health",
        gpu=True,
        probe_interval=0.2,
        gpu_interval=0.2,
    )
    follower = LaunchFollower(spec, pool=pool)
    # the updates are closed after the follower stops, so it never writes to a closed stream
    with follower.updates, anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(follower.run)  # the log as it was has been read, over the wrapper
            with log.open("ab") as file:
                file.write(text[half:])
            verdict: Concluded | None = None
            async for update in follower.updates:
                if isinstance(update, Concluded):
                    verdict = update
                    break
            tg.cancel_scope.cancel()
    assert verdict is not None
    assert (verdict.verdict.to_json()["state"], verdict.verdict.to_json()["error"]["category"]) == (
        "crashed",
        "oom",
    )


@pytest.mark.sshd
async def test_watch_command_line_reaches_a_verdict(
    restricted: SSHDServer, sleeper: tuple[Process, str], tmp_path: Path
) -> None:
    """`python -m watchdog.cli watch ssh://...` with --process and --gpu says ready (exit 0) through the wrapper."""
    _, pattern = sleeper
    log = tmp_path / "server.log"
    shutil.copy(READY, log)
    target = f"ssh://{restricted.user}@{restricted.host}:{restricted.port}{log}"
    argv = [sys.executable, "-m", "watchdog.cli", "watch", target, "--json", "--identity"]
    argv += [str(restricted.client_key), "--known-hosts", str(restricted.known_hosts), "--process", pattern]
    argv += ["--gpu", "--gpu-interval", "0.2", "--timeout", "45"]
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process(argv, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert b'"state": "ready"' in result.stdout


async def _expect(items: AsyncIterator[SourceItem], kind: type[SourceItem]) -> SourceItem:
    """The next item of `kind`, skipping the others."""
    async for item in items:
        if isinstance(item, kind):
            return item
    raise AssertionError(f"the stream ended before a {kind.__name__}")


@pytest.mark.sshd
async def test_rotation_and_replacement_are_followed(
    restricted: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """The streaming script follows appends, a rename rotation and a delete-and-recreate through the wrapper."""
    log = tmp_path / "it's a log"
    log.write_bytes(b"first\n")
    source = SSHSource(
        pool, restricted.host, str(log), port=restricted.port, user=restricted.user, stat_interval=0.05
    )
    with anyio.fail_after(DEADLINE):
        async with source.open_follow(0) as items:
            assert isinstance(await items.__anext__(), Connected)
            assert await _expect(items, CaughtUp) == CaughtUp(6)
            with log.open("ab") as file:
                file.write(b"second\n")
            assert await _expect(items, Chunk) == Chunk(6, b"second\n")
            log.rename(tmp_path / "it's a log.1")
            log.write_bytes(b"rotated\n")
            assert await _expect(items, FileRestarted) == FileRestarted("rotated")
            assert await _expect(items, Chunk) == Chunk(0, b"rotated\n")
            log.unlink()
            log.write_bytes(b"replaced\n")
            assert await _expect(items, FileRestarted) == FileRestarted("replaced")
            assert await _expect(items, Chunk) == Chunk(0, b"replaced\n")


@pytest.mark.sshd
async def test_logs_are_followed_through_the_multiplexer(restricted: SSHDServer, tmp_path: Path) -> None:
    """With `multiplex` on, the wrapper lets the multiplexer run, and three logs are followed through its one channel
    (rotation included)."""
    logs = [tmp_path / f"it's log {index}" for index in range(3)]
    for index, log in enumerate(logs):
        log.write_bytes(b"first %d\n" % index)
    options = replace(_options(restricted), multiplex=True)
    where = {"port": restricted.port, "user": restricted.user}
    with anyio.fail_after(DEADLINE):
        async with SSHPool(options) as pool, AsyncExitStack() as stack:
            streams = [
                await stack.enter_async_context(
                    SSHSource(pool, restricted.host, str(log), stat_interval=0.05, **where).open_follow(0)
                )
                for log in logs
            ]
            for index, items in enumerate(streams):
                assert await _expect(items, Chunk) == Chunk(0, b"first %d\n" % index)
            assert pool.multiplexed(restricted.host, **where) == len(logs)
            assert pool.channel_counts(restricted.host, **where) == [1]
            logs[1].rename(tmp_path / "it's log 1.1")
            logs[1].write_bytes(b"rotated\n")
            assert await _expect(streams[1], FileRestarted) == FileRestarted("rotated")
            assert await _expect(streams[1], Chunk) == Chunk(0, b"rotated\n")
            with logs[2].open("ab") as file:
                file.write(b"second\n")
            assert await _expect(streams[2], Chunk) == Chunk(8, b"second\n")
    assert pool.muxes_started == 1


def _frames(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """The multiplexer's frames after its first line: (ID, KIND, BYTES or the exit status)."""
    hello, _, data = data.partition(b"\n")
    assert hello == b"watchdog-mux 1"
    frames = []
    while data:
        header, _, data = data.partition(b"\n")
        ident, kind, number = header.split(b" ")
        if kind == b"x":
            frames.append((int(ident), kind, number))
            continue
        frames.append((int(ident), kind, data[: int(number)]))
        data = data[int(number) :]
    return frames


@pytest.mark.sshd
async def test_the_multiplexer_refuses_what_the_wrapper_would(restricted: SSHDServer, tmp_path: Path) -> None:
    """Through the wrapper, the multiplexer runs no reader it does not embed, and none with an argument the wrapper
    would refuse (each refused with exit 126 and why); the reader it does embed runs."""
    mark = tmp_path / "pwned"
    log = tmp_path / "a log"
    log.write_bytes(b"x\n")
    good = stream_args_hex(str(log))

    def hexed(*words: str) -> str:
        return " ".join(word.encode().hex() for word in words)

    control = [
        f"o 1 watchdog-pid {hexed('1')}",  # the wrapper's, not the multiplexer's
        f"o 2 sh {hexed('-c', f'touch {mark}')}",
        f"o 3 watchdog-follow {hexed(str(log), '1', '1e3', '0.010', '0', '0')}",  # not a decimal
        f"o 4 watchdog-follow {hexed(str(log), '-1', '0.250', '0.010', '0', '0')}",  # not an integer
        f"o 5 watchdog-follow {hexed(str(log) + chr(10) + 'x', '1', '0.250', '0.010', '0', '0')}",  # a newline
        f"o 6 watchdog-follow {hexed(str(log), '1', '0.250', '0.010', '0')}",  # one argument short
        f"o 7 watchdog-follow {good}",
    ]
    async with await _connect(restricted) as conn:
        with anyio.fail_after(DEADLINE):
            process = await conn.create_process(
                shlex.join(["python3", "-c", MUX_PROGRAM, MUX_NAME]), encoding=None
            )
            process.stdin.write("".join(line + "\n" for line in control).encode())
            output = b""
            while b"\n7 o " not in output:  # its header came: the reader runs
                output += await process.stdout.read(65536)
            process.stdin.write(b"c 7\n")  # its lifeline closed: it ends
            while not output.endswith(b"\n7 x 0\n"):
                output += await process.stdout.read(65536)
            process.stdin.write_eof()
            await process.wait()
    frames = _frames(output)
    refusals = {ident: data for ident, kind, data in frames if kind == b"e" and ident < 7}
    ends = {ident: data for ident, kind, data in frames if kind == b"x"}
    assert sorted(refusals) == [1, 2, 3, 4, 5, 6]
    assert all(data.startswith(b"watchdog-mux: refused: ") for data in refusals.values())
    assert [ends[ident] for ident in range(1, 7)] == [b"126"] * 6
    assert b"".join(data for ident, kind, data in frames if ident == 7 and kind == b"o").startswith(b"ok ")
    assert not mark.exists()


@pytest.mark.sshd
async def test_polling_and_checkpoint_identity_work(
    restricted: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """The polling script reads the log, and the checkpoint identity command sees the file the host sees."""
    log = tmp_path / "server log"
    log.write_bytes(b"x" * 10_000)
    source = SSHSource(
        pool, restricted.host, str(log), port=restricted.port, user=restricted.user, stream=False
    )
    with anyio.fail_after(DEADLINE):
        async with source.open_follow(0) as items:
            assert await _expect(items, Chunk) == Chunk(0, b"x" * 10_000)
            assert await _expect(items, CaughtUp) == CaughtUp(10_000)
        identity = await source.identify(9_000)
    assert identity is not None
    assert identity == local_identity(str(log), 9_000)


@pytest.mark.sshd
async def test_process_probes_work(
    restricted: SSHDServer, pool: SSHPool, sleeper: tuple[Process, str], tmp_path: Path
) -> None:
    """Process probes by pid, pattern and pid file see the process alive, then gone, through the wrapper."""
    process, pattern = sleeper
    pid_file = tmp_path / "it's a server.pid"
    probe = partial(SSHProcessProbe, pool, restricted.host, port=restricted.port, user=restricted.user)
    by_pid, by_pattern, by_file = (
        probe(pid=process.pid),
        probe(pattern=pattern),
        probe(pid_file=str(pid_file)),
    )
    pid_file.write_text("not a pid")
    assert [await by_pid.alive(), await by_pattern.alive(), await by_file.alive()] == [True, True, True]
    pid_file.write_text(f"{process.pid}\n")
    assert await by_file.alive()
    process.kill()
    await process.wait()
    assert [await by_pid.alive(), await by_pattern.alive(), await by_file.alive()] == [False, False, False]


@pytest.mark.sshd
async def test_gpu_probe_and_sampler_work(
    restricted: SSHDServer, pool: SSHPool, gpu_host: GpuHost, sleeper: tuple[Process, str]
) -> None:
    """The sampler's host-wide nvidia-smi query and its script (nvidia-smi, ps, pgrep) both run and are read."""
    process, pattern = sleeper
    gpu_host.apps_csv.write_text(f"{process.pid}, python3, {APPS_MIB}\n")
    sampler = HostGpuSampler(pool=pool, host=restricted.host, port=restricted.port, user=restricted.user)
    with anyio.fail_after(DEADLINE):
        with sampler.subscribe_host() as gpus:
            samples = await gpus.__anext__()
        with sampler.subscribe(pattern=pattern) as feed:
            share = await feed.__anext__()
    assert [(s.name, s.memory_used_bytes) for s in samples] == [("NVIDIA H200", 38675 * 2**20)]
    assert (share.used_bytes, process.pid in share.pids) == (APPS_MIB * 2**20, True)


@pytest.mark.sshd
async def test_forward_is_allowed_to_the_health_port_only(
    restricted: SSHDServer, pool: SSHPool, health_port: int, other_port: int
) -> None:
    """The health probe's forward reaches the permitopen= port; another port, or a remote forward, is refused."""
    health = partial(HealthProbe, pool=pool, host=restricted.host, port=restricted.port, user=restricted.user)
    async with health(f"http://127.0.0.1:{health_port}/health") as probe:
        assert await probe.check() == 200
    async with health(f"http://127.0.0.1:{other_port}/health", timeout=5) as probe:
        assert await probe.check() is None
    async with await _connect(restricted) as conn:
        with pytest.raises(asyncssh.ChannelOpenError) as refused:
            await conn.open_connection("127.0.0.1", other_port)
        with pytest.raises(asyncssh.ChannelListenError):
            await conn.forward_remote_port("127.0.0.1", 0, "127.0.0.1", health_port)
    assert refused.value.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED


@pytest.mark.sshd
@pytest.mark.parametrize(
    "command",
    [
        pytest.param("id", id="id"),
        pytest.param("cat /etc/passwd", id="cat"),
        pytest.param(None, id="login-shell"),
        pytest.param(COMMANDS["watchdog-pid"].replace("p=$1", "p=$1; id"), id="altered-script"),
    ],
)
async def test_other_commands_are_refused(restricted: SSHDServer, command: str | None) -> None:
    """Over SSH, a command that is not watchdog's (or no command: a shell) gets exit 126 and the wrapper's message."""
    async with await _connect(restricted) as conn:
        with anyio.fail_after(DEADLINE):
            result = (
                await conn.run(command, check=False) if command else await conn.run(check=False, input="id\n")
            )
    assert result.exit_status == REFUSED
    assert result.stdout == ""
    assert str(result.stderr).startswith("llm-launch-watchdog-forced-command: refused: ")


@pytest.mark.sshd
async def test_openssh_client_command_is_refused(restricted: SSHDServer) -> None:
    """The OpenSSH client's `ssh host id` is refused too, and an sftp session cannot start."""
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.skip("no OpenSSH client (ssh) here")
    argv = [ssh, "-F", "none", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={restricted.known_hosts}"]
    argv += [
        "-i",
        str(restricted.client_key),
        "-p",
        str(restricted.port),
        f"{restricted.user}@{restricted.host}",
    ]
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process([*argv, "id"], check=False)
        async with await _connect(restricted) as conn:
            with pytest.raises(asyncssh.Error):
                await conn.start_sftp_client()
    assert (result.returncode, result.stdout) == (REFUSED, b"")
    assert b"llm-launch-watchdog-forced-command: refused: " in result.stderr


@pytest.mark.sshd
async def test_injection_attempts_do_not_execute(
    restricted: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """Hostile paths in watchdog's own commands stay data, and hand-made injections are refused: nothing runs."""
    mark = tmp_path / "pwned"
    with anyio.fail_after(DEADLINE):
        for path in _hostile_paths(mark):
            source = SSHSource(pool, restricted.host, path, port=restricted.port, user=restricted.user)
            async with source.open_follow(0) as items:
                assert await _expect(items, FileMissing) == FileMissing(path)
            assert await source.identify(10) is None
            probe = SSHProcessProbe(
                pool, restricted.host, port=restricted.port, user=restricted.user, pid_file=path
            )
            assert await probe.alive()  # no pid in that (missing) file: unknown, so alive
        async with await _connect(restricted) as conn:
            for command in _injections(mark):
                result = await conn.run(command, check=False)
                assert result.exit_status == REFUSED, command
    assert not mark.exists()


@pytest.mark.sshd
async def test_a_stale_wrapper_is_an_error_not_a_dead_process(
    restricted: SSHDServer, pool: SSHPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pid script the wrapper does not know fails the probe loudly instead of reading as "process gone"."""
    monkeypatch.setattr(process_module, "_PID_SCRIPT", process_module._PID_SCRIPT + ":\n")
    probe = SSHProcessProbe(
        pool, restricted.host, port=restricted.port, user=restricted.user, pid=os.getpid()
    )
    with anyio.fail_after(DEADLINE), pytest.raises(TargetError, match="refused"):
        await probe.alive()


@pytest.mark.sshd
async def test_a_wrapper_that_refuses_the_multiplexer_gets_a_channel_per_log(
    restricted: SSHDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multiplexer the wrapper does not know (a wrapper older than the daemon) is refused: said once, and the logs
    are read in a channel each, through the wrapper as before."""
    monkeypatch.setattr(mux_module, "MUX_PROGRAM", mux_module.MUX_PROGRAM + "# a later release\n")
    logs = [tmp_path / f"log {index}" for index in range(2)]
    for index, log in enumerate(logs):
        log.write_bytes(b"first %d\n" % index)
    where = {"port": restricted.port, "user": restricted.user}
    with structlog.testing.capture_logs() as logged, anyio.fail_after(DEADLINE):
        async with SSHPool(replace(_options(restricted), multiplex=True)) as pool, AsyncExitStack() as stack:
            for index, log in enumerate(logs):
                source = SSHSource(pool, restricted.host, str(log), **where)
                items = await stack.enter_async_context(source.open_follow(0))
                assert await _expect(items, Chunk) == Chunk(0, b"first %d\n" % index)
            assert pool.channel_counts(restricted.host, **where) == [2]
    assert pool.muxes_started == 0
    said = [entry for entry in logged if entry["event"] == "SSH multiplexer not started: one channel per log"]
    assert len(said) == 1
    assert "exit 126" in said[0]["reason"]
    assert said[0]["log_level"] == "warning"  # install this release's wrapper
    assert "refused" in said[0]["reason"]


DOCS = [ROOT / "docs" / "least-privilege.md", ROOT / "docs" / "troubleshooting.md"]


def test_the_docs_show_the_options_tested_here() -> None:
    """docs/least-privilege.md gives the authorized_keys line and sshd settings these tests run sshd with."""
    lines = DOCS[0].read_text().splitlines()
    installed = key_options(30000).replace(
        str(WRAPPER), "/usr/local/lib/llm-launch-watchdog/llm-launch-watchdog-forced-command"
    )
    assert f"{installed} ssh-ed25519 AAAA... watchdog@monitor" in lines
    assert all(f"    {setting}" in lines for setting in SSHD_CONFIG)


@pytest.mark.parametrize("doc", DOCS, ids=[doc.name for doc in DOCS])
def test_the_docs_links_stay_in_the_repository(doc: Path) -> None:
    """Every link of the page is a file of the repository (or an anchor of the page), none outside it."""
    targets = re.findall(r"\]\(([^)]*)\)", doc.read_text())
    assert targets
    for target in targets:
        assert not re.match(r"[a-z]+:", target), target
        path = target.partition("#")[0]
        assert not path or (doc.parent / path).exists(), target
