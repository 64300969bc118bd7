"""Start a throwaway OpenSSH sshd on 127.0.0.1 for tests and benchmarks."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import asyncssh

SSHD = "/usr/sbin/sshd"
READY_TIMEOUT = 15.0
_LISTENING = "Server listening on"


class SSHDUnavailable(RuntimeError):
    """sshd is not installed or could not be started here."""


@dataclass
class SSHDServer:
    """A running sshd and the files a client needs to reach it."""

    host: str
    port: int
    user: str
    workdir: Path
    client_key: Path
    known_hosts: Path
    host_key_line: str
    process: subprocess.Popen[bytes]
    log: list[str] = field(default_factory=list)
    drain: threading.Thread | None = None

    @property
    def listener_pid(self) -> int:
        """The pid of the listening sshd (sessions are its children)."""
        return self.process.pid

    def session_pids(self) -> list[int]:
        """The pids of the per-connection sshd processes (children of the listener)."""
        out = subprocess.run(
            ["pgrep", "-P", str(self.listener_pid)], capture_output=True, text=True, check=False
        )
        return [int(pid) for pid in out.stdout.split()]

    def kill_sessions(self) -> list[int]:
        """SIGKILL every per-connection sshd process and its privilege-separated child, which cuts every client
        connection (the child holds the socket: killed alone, the monitor would leave an idle connection up)."""
        pids = self.session_pids()
        children = [
            int(child)
            for pid in pids
            for child in subprocess.run(
                ["pgrep", "-P", str(pid), "-x", "sshd"], capture_output=True, text=True, check=False
            ).stdout.split()
        ]
        for pid in [*pids, *children]:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _write_key(path: Path) -> asyncssh.SSHKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    path.chmod(0o600)
    return key


def _drain(stream: object, log: list[str], ready: threading.Event) -> None:
    """Read sshd's stderr until it closes, so a full pipe never blocks sshd."""
    assert hasattr(stream, "readline")
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip()
        log.append(line)
        if _LISTENING in line:
            ready.set()
    ready.set()


def _wait_banner(port: int, deadline: float) -> None:
    """Connect and read the SSH banner: readiness by connecting, bounded by a deadline."""
    remaining = max(deadline - time.monotonic(), 0.1)
    with socket.create_connection(("127.0.0.1", port), timeout=remaining) as sock:
        sock.settimeout(remaining)
        banner = sock.recv(64)
    if not banner.startswith(b"SSH-2.0-"):
        raise SSHDUnavailable(f"sshd on port {port} answered {banner!r}, not an SSH banner")


def start_sshd(workdir: Path, *, attempts: int = 3, extra_config: Sequence[str] = ()) -> SSHDServer:
    """Start sshd -D -e on 127.0.0.1 with generated keys; return once it accepts connections.

    `extra_config` lines (e.g. "MaxSessions 10") go before the defaults, so they win: sshd keeps
    the first value it reads for a keyword. A `Match` block does not belong there.
    """
    if not os.path.exists(SSHD):
        raise SSHDUnavailable(f"{SSHD} is not installed (Debian: apt-get install openssh-server)")
    # sshd refuses to start without its privilege separation directory.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    host_key_path = workdir / "ssh_host_ed25519_key"
    host_key = _write_key(host_key_path)
    client_key_path = workdir / "id_ed25519"
    client_key = _write_key(client_key_path)
    (workdir / "authorized_keys").write_bytes(client_key.export_public_key())
    user = pwd.getpwuid(os.getuid()).pw_name
    host_key_line = host_key.export_public_key().decode().split()
    last_error = ""
    for _ in range(attempts):
        port = _free_port()
        config = workdir / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    *extra_config,
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key_path}",
                    f"PidFile {workdir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "AllowTcpForwarding yes",
                    "MaxSessions 100",
                    "MaxStartups 100:30:200",
                    "LogLevel INFO",
                    "",
                ]
            )
        )
        known_hosts = workdir / "known_hosts"
        line = f"[127.0.0.1]:{port} {host_key_line[0]} {host_key_line[1]}"
        known_hosts.write_text(line + "\n")
        process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        log: list[str] = []
        ready = threading.Event()
        drain = threading.Thread(target=_drain, args=(process.stderr, log, ready), daemon=True)
        drain.start()
        deadline = time.monotonic() + READY_TIMEOUT
        ready.wait(READY_TIMEOUT)
        if process.poll() is None and any(_LISTENING in entry for entry in log):
            _wait_banner(port, deadline)
            return SSHDServer(
                host="127.0.0.1",
                port=port,
                user=user,
                workdir=workdir,
                client_key=client_key_path,
                known_hosts=known_hosts,
                host_key_line=line,
                process=process,
                log=log,
                drain=drain,
            )
        process.kill()
        process.wait()
        drain.join(5)
        if process.stderr is not None:
            process.stderr.close()
        last_error = "\n".join(log)
    raise SSHDUnavailable(f"sshd did not start: {last_error}")


def stop_sshd(server: SSHDServer) -> None:
    """Stop the listener and every session it still serves.

    The listener is frozen first: a client whose session is cut reconnects at once, and a listener still
    accepting would fork it a new session between the kill and its own end, a session that outlives it (the
    connection then never reads as lost). Frozen, it forks none, and its sessions stay its children for
    `kill_sessions` to find."""
    if server.process.poll() is None:
        os.kill(server.listener_pid, signal.SIGSTOP)
    server.kill_sessions()
    server.process.terminate()
    with suppress(ProcessLookupError):  # a stopped process acts on its SIGTERM only when continued
        os.kill(server.listener_pid, signal.SIGCONT)
    try:
        server.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    if server.drain is not None:
        server.drain.join(5)
    if server.process.stderr is not None:
        server.process.stderr.close()


@contextmanager
def running_sshd(workdir: Path, *, extra_config: Sequence[str] = ()) -> Iterator[SSHDServer]:
    """Run sshd for the duration of the block (`extra_config` as for `start_sshd`)."""
    server = start_sshd(workdir, extra_config=extra_config)
    try:
        yield server
    finally:
        stop_sshd(server)


def sshd_available() -> bool:
    """Whether an sshd binary is installed where the helper looks for it."""
    return os.path.exists(SSHD) and shutil.which("pgrep") is not None


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


def _opens(pid: int, path: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target == path or target == f"{path} (deleted)":
            return True
    return False


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as file:
            return {int(child) for child in file.read().split()}
    except OSError:
        return set()


def readers_of(path: str) -> set[int]:
    """Processes (other than this one) that name `path` on their command line or hold it open,
    with all their descendants: the remote follower's sh, tail, stat loop and cat."""
    found: set[int] = set()
    needle = path.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        if needle in _cmdline(pid) or _opens(pid, path):
            found.add(pid)
    todo = list(found)
    while todo:
        for child in _children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def pgrep_f(text: str) -> list[int]:
    """`pgrep -f` for a fixed string (regex metacharacters escaped)."""
    pattern = "".join(f"[{char}]" if char in ".^$*+?()[]{}|\\" else char for char in text)
    out = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True, check=False)
    return [int(pid) for pid in out.stdout.split() if int(pid) != os.getpid()]


async def wait_gone(pids: set[int], within: float = 10.0) -> None:
    """Wait (by pidfd, not by polling) until every process in `pids` has exited."""
    with anyio.fail_after(within):
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await anyio.wait_readable(fd)
            finally:
                os.close(fd)


async def assert_no_reader_left(path: Path) -> None:
    """Wait for the follower's remote processes to exit, then check none names or holds `path`."""
    for _ in range(5):
        # A second round catches a short-lived `stat` the stat loop had just started.
        left = readers_of(str(path))
        if not left:
            break
        await wait_gone(left)
    assert readers_of(str(path)) == set()
    assert pgrep_f(str(path)) == []


def pending(sock: socket.socket) -> int:
    """Bytes waiting in a socket's receive queue (Linux's FIONREAD)."""
    import fcntl  # noqa: PLC0415 - Linux only, as these tests
    import struct  # noqa: PLC0415
    import termios  # noqa: PLC0415

    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0])


def busy_until_pending(sock: socket.socket, size: int, within: float = 10.0) -> None:
    """Keep the event loop busy (this call does not await) until at least `size` bytes wait in the socket's
    receive queue."""
    deadline = time.monotonic() + within
    while (waiting := pending(sock)) < size:
        assert time.monotonic() < deadline, f"only {waiting} bytes came"
        time.sleep(0.005)
