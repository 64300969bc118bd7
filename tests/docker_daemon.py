"""Start a throwaway Docker daemon (no systemd, no network, vfs storage) and a busybox image, for tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

DOCKERD = "/usr/sbin/dockerd"
# A static busybox is the whole image: Debian's busybox-static, extracted beside the system's busybox (installed,
# it would replace that one, whose sh the remote-script tests run with GNU tools: busybox-static's sh prefers
# its own applets), named by WATCHDOG_STATIC_BUSYBOX (.ci/run sets it), or /bin/busybox where that one is static.
BUSYBOX = next(
    (
        p
        for p in (os.environ.get("WATCHDOG_STATIC_BUSYBOX"), "/opt/busybox-static/busybox")
        if p and os.path.exists(p)
    ),
    "/bin/busybox",
)
READY_TIMEOUT = 30.0
IMAGE = "watchdog-busybox"
# what the test containers call; each a link to busybox in the image
APPLETS = ("sh", "cat", "echo", "head", "tr", "usleep", "sleep", "printf", "sed", "kill", "true", "wc")


class DockerUnavailable(RuntimeError):
    """Docker cannot run here (not installed, not root, or the daemon did not start)."""


@dataclass
class DockerDaemon:
    """A running dockerd and how to reach it."""

    workdir: Path
    socket: Path
    process: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        """DOCKER_HOST for a client of this daemon."""
        return f"unix://{self.socket}"

    def env(self) -> dict[str, str]:
        """This process's environment with DOCKER_HOST pointing at this daemon."""
        return {**os.environ, "DOCKER_HOST": self.host}

    def docker(self, *args: str, check: bool = True, input: bytes | None = None) -> str:
        """Run the docker CLI against this daemon; its stdout."""
        done = subprocess.run(
            ["docker", *args], env=self.env(), input=input, capture_output=True, check=False, timeout=60
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode(errors="replace")

    def oom_recorded_at(self, container: str) -> float | None:
        """When this daemon recorded the kernel's OOM kill of `container` (its `oom` event, Unix seconds), or
        None: it recorded none. The runtime learns of the kill by an event of its own, which can come after the
        exit on a loaded machine: what a reader could know, and from when."""
        out = self.docker(
            "events",
            "--since",
            "0",
            "--until",
            str(int(time.time()) + 1),
            "--filter",
            f"container={container}",
            "--filter",
            "event=oom",
            "--format",
            "{{.TimeNano}}",
        )
        times = [int(t) / 1e9 for t in out.split()]
        return min(times) if times else None


def _static(path: str) -> bool:
    """Whether `path` is a statically linked ELF (a dynamic busybox cannot run alone in a container)."""
    try:
        with open(path, "rb") as file:
            head = file.read(1 << 16)
    except OSError:
        return False
    return head.startswith(b"\x7fELF") and b"ld-linux" not in head


def docker_missing() -> str | None:
    """Why Docker cannot run here, or None."""
    if os.geteuid() != 0:
        return "the Docker tests start their own dockerd, which needs root"
    for program, package in ((DOCKERD, "docker.io"), (shutil.which("docker") or "docker", "docker.io")):
        if not os.path.exists(program):
            return f"{program} is not installed (Debian: apt-get install {package})"
    return static_busybox_missing()


def static_busybox_missing() -> str | None:
    """Why there is no static busybox to make the test image of, or None."""
    if not _static(BUSYBOX):
        return (
            f"{BUSYBOX} is not a static busybox (Debian: `apt-get download busybox-static`, extract it with "
            "`dpkg-deb -x`, and name its bin/busybox in WATCHDOG_STATIC_BUSYBOX)"
        )
    return None


def start_dockerd(workdir: Path) -> DockerDaemon:
    """Start dockerd on a unix socket in `workdir` (keep it short: a socket path has 108 bytes at most);
    return once it answers."""
    why = docker_missing()
    if why is not None:
        raise DockerUnavailable(why)
    socket = workdir / "d.sock"
    log = (workdir / "dockerd.log").open("wb")
    process = subprocess.Popen(
        [
            DOCKERD,
            "--storage-driver=vfs",
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--data-root",
            str(workdir / "data"),
            "--exec-root",
            str(workdir / "x"),
            "--pidfile",
            str(workdir / "pid"),
            "-H",
            f"unix://{socket}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    daemon = DockerDaemon(workdir, socket, process)
    deadline = time.monotonic() + READY_TIMEOUT
    while True:  # the socket appears before the API answers: ask it
        if process.poll() is not None:
            raise DockerUnavailable(f"dockerd exited {process.returncode}: {_tail(workdir / 'dockerd.log')}")
        if socket.exists():
            done = subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"],
                env=daemon.env(),
                capture_output=True,
                check=False,
                timeout=READY_TIMEOUT,
            )
            if done.returncode == 0:
                return daemon
        if time.monotonic() > deadline:
            stop_dockerd(daemon)
            raise DockerUnavailable(
                f"dockerd did not answer in {READY_TIMEOUT} s: {_tail(workdir / 'dockerd.log')}"
            )
        time.sleep(0.05)  # polling a socket that has no event to wait on, under a deadline


def _tail(path: Path) -> str:
    with suppress(OSError):
        return " / ".join(path.read_text(errors="replace").splitlines()[-5:])
    return ""


def make_image(daemon: DockerDaemon, name: str = IMAGE, applets: Sequence[str] = APPLETS) -> str:
    """Import an image of a static busybox and its applet links (no registry); return its name."""
    rootfs = daemon.workdir / "rootfs"
    (rootfs / "bin").mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").mkdir(exist_ok=True)
    shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
    for applet in applets:
        link = rootfs / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
    daemon.docker("import", "-", name, input=tar.stdout)
    return name


def stop_dockerd(daemon: DockerDaemon) -> None:
    """Stop dockerd (its containers with it) and remove what it wrote."""
    if daemon.process.poll() is None:
        with suppress(ProcessLookupError):
            os.kill(daemon.process.pid, signal.SIGTERM)
        try:
            daemon.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(daemon.process.pid, signal.SIGKILL)
            daemon.process.wait()
    # containerd's shims outlive a dockerd that was killed: they are in its session
    with suppress(ProcessLookupError):
        os.killpg(daemon.process.pid, signal.SIGKILL)
    shutil.rmtree(daemon.workdir, ignore_errors=True)


@contextmanager
def running_dockerd() -> Iterator[DockerDaemon]:
    """A dockerd with the busybox image, for the duration of the block (under a short /tmp path)."""
    workdir = Path(tempfile.mkdtemp(prefix="wdk-", dir="/tmp"))
    daemon = start_dockerd(workdir)
    try:
        make_image(daemon)
        yield daemon
    finally:
        stop_dockerd(daemon)
