"""A throwaway Podman store (vfs, cgroupfs, no network, events in a file) with a busybox image, for tests.

Podman has no daemon: each `podman` command reads the store named by its flags. The source under test runs plain
`podman` as it would on a user's host, so the store's flags are given by a `podman` script of their own, first on
that process's PATH (`Podman.path`). Root only (rootless Podman needs subuids and a user session).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from docker_daemon import APPLETS, BUSYBOX, static_busybox_missing

IMAGE = "localhost/watchdog-busybox"
PODMAN = "/usr/bin/podman"
TIMEOUT = 60.0

# The OCI runtime the store's containers run under: runc with the bundle's `process.rlimits` dropped first.
# Podman run as root asks for RLIMIT_NOFILE and RLIMIT_NPROC at their maximum, which a sandbox without
# CAP_SYS_RESOURCE refuses in the container's init ("error setting rlimits for ready process: ... operation not
# permitted"), at any value, the current ones too; Docker asks for none. The container keeps its parent's limits.
_RUNTIME = """\
#!/bin/sh
b=
prev=
for a; do
  [ "$prev" = --bundle ] || [ "$prev" = -b ] && b=$a
  case $a in --bundle=*) b=${a#--bundle=};; esac
  prev=$a
done
if [ -n "$b" ] && [ -f "$b/config.json" ]; then
  @PYTHON@ -c 'import json, sys
p = sys.argv[1]
with open(p) as f:
    c = json.load(f)
c.get("process", {}).pop("rlimits", None)
with open(p, "w") as f:
    json.dump(c, f)' "$b/config.json" || exit 1
fi
exec @RUNC@ "$@"
"""


class PodmanUnavailable(RuntimeError):
    """Podman cannot run here (not installed, not root, or a container does not start)."""


@dataclass(frozen=True)
class Podman:
    """A Podman store and the `podman` that uses it."""

    workdir: Path

    @property
    def bin(self) -> Path:
        """The folder of this store's `podman` script."""
        return self.workdir / "bin"

    def path(self) -> str:
        """PATH with this store's `podman` first."""
        return f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"

    def podman(self, *args: str, check: bool = True, input: bytes | None = None) -> str:
        """Run podman on this store; its stdout."""
        done = subprocess.run(
            [str(self.bin / "podman"), *args], input=input, capture_output=True, check=False, timeout=TIMEOUT
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode(errors="replace")


def podman_missing() -> str | None:
    """Why Podman cannot run here, or None."""
    if os.geteuid() != 0:
        return "the Podman tests use a store of their own as root"
    if not os.path.exists(PODMAN):
        return f"{PODMAN} is not installed (Debian: apt-get install podman)"
    if shutil.which("runc") is None:
        return "runc is not installed (Debian: apt-get install runc)"
    return static_busybox_missing()


def _write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _make_image(podman: Podman) -> None:
    rootfs = podman.workdir / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "tmp").mkdir()
    shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
    for applet in APPLETS:
        (rootfs / "bin" / applet).symlink_to("busybox")
    tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
    podman.podman("import", "-", IMAGE, input=tar.stdout)


@contextmanager
def podman_store() -> Iterator[Podman]:
    """A Podman store with the busybox image, for the duration of the block; its containers removed after."""
    why = podman_missing()
    if why is not None:
        raise PodmanUnavailable(why)
    podman = Podman(Path(tempfile.mkdtemp(prefix="wdp-", dir="/tmp")))
    podman.bin.mkdir()
    runtime = podman.bin / "oci-runtime"
    _write_script(
        runtime,
        _RUNTIME.replace("@PYTHON@", shlex.quote(sys.executable)).replace(
            "@RUNC@", shlex.quote(str(shutil.which("runc")))
        ),
    )
    flags = [
        f"--root={podman.workdir / 'root'}",
        f"--runroot={podman.workdir / 'run'}",
        "--storage-driver=vfs",
        "--cgroup-manager=cgroupfs",
        "--events-backend=file",
        f"--runtime={runtime}",
    ]
    _write_script(podman.bin / "podman", f'#!/bin/sh\nexec {PODMAN} {shlex.join(flags)} "$@"\n')
    try:
        _make_image(podman)
        try:
            podman.podman("run", "--rm", "--network=none", IMAGE, "true")
        except RuntimeError as exc:
            raise PodmanUnavailable(f"a container does not start: {exc}") from exc
        yield podman
    finally:
        remove_containers(podman)
        with suppress(RuntimeError, subprocess.TimeoutExpired):
            podman.podman("system", "reset", "--force")
        shutil.rmtree(podman.workdir, ignore_errors=True)


def remove_containers(podman: Podman) -> None:
    """Remove every container of the store, running ones too (their conmon with them)."""
    with suppress(RuntimeError, subprocess.TimeoutExpired):
        podman.podman("rm", "--all", "--force", "--time", "0")
