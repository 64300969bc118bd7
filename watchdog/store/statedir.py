"""The state directory taken by one daemon (`lock_state_dir`), and the old default directory's state refused."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from watchdog.exceptions import ConfigError
from watchdog.store.connection import _private_open, db_path
from watchdog.vocabulary import DEFAULT_STATE_DIR, LEGACY_STATE_DIR

__all__ = ["LOCK_NAME", "StateDirLock", "lock_state_dir", "refuse_legacy_state"]

LOCK_NAME = "watchdog.lock"  # held (flock) by the one daemon that uses the state directory; holds its pid


class StateDirLock:
    """The lock one daemon holds on its state directory for as long as it runs (see `lock_state_dir`)."""

    def __init__(self, path: Path, fd: int) -> None:
        """Use `lock_state_dir`."""
        self.path = path
        self._fd: int | None = fd

    def __enter__(self) -> StateDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        """Let another daemon use the directory (the lock also goes when the process ends, however)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None


def refuse_legacy_state(
    state_dir: str | Path, *, default: str | Path = DEFAULT_STATE_DIR, legacy: str | Path = LEGACY_STATE_DIR
) -> None:
    """Refuse to start an empty state in the default directory while the old default holds a state file.

    The default `state_dir` was `/var/lib/watchdog` before the rename to llm-launch-watchdog. A daemon
    upgraded in place whose config leaves `state_dir` at the default would otherwise start a new, empty
    state beside the old one: its history, silences and checkpoints gone, and alerts waiting in its outbox
    never sent. Refused (exit 78, which the unit does not restart) rather than warned about, because a
    warning scrolls by in the journal while the new file takes over for good; the message says how to move
    the old state over. Nothing is refused once the new directory has its own state file.

    Raises:
        ConfigError: `state_dir` is `default`, which has no state file, and `legacy` has one (or cannot be
            looked into by this user, so may have one).
    """
    if os.path.normpath(state_dir) != os.path.normpath(default) or os.path.exists(db_path(default)):
        return
    old = db_path(legacy)
    move = (
        f"stop the old daemon, then as root: mkdir -p {default} && mv {old}* {default}/ && "
        f"chown -R llm-launch-watchdog:llm-launch-watchdog {default} (upgrade notes: CHANGELOG.md)"
    )
    try:
        os.stat(old)
    except (FileNotFoundError, NotADirectoryError):
        return
    except PermissionError:
        if not os.path.isdir(legacy):
            return
        raise ConfigError(
            str(default),
            "daemon.state_dir",
            f"no state file here, and {legacy} (the default state directory before the rename to "
            f"llm-launch-watchdog) cannot be looked into by this user: if it holds the old state, move it "
            f"over: {move}; if not, move {legacy} away",
        ) from None
    raise ConfigError(
        str(default),
        "daemon.state_dir",
        f"no state file here, but {old} holds the state of watchdog before the rename to llm-launch-watchdog "
        f"(its history, silences, checkpoints and unsent alerts): move it over: {move}; or, to start "
        f"afresh, move {legacy} away",
    )


def lock_state_dir(state_dir: str | Path) -> StateDirLock:
    """Take the state directory for this process (blocking; made 0700 if need be): an exclusive `flock` on
    `LOCK_NAME` in it, which then holds this process's pid. A lock left by a process that died is taken over
    (the kernel released it).

    Raises:
        ConfigError: another process holds it (its pid named), or the lock file cannot be made.
    """
    path = Path(state_dir) / LOCK_NAME
    where = str(path)
    try:
        fd = _private_open(path)
    except OSError as exc:
        raise ConfigError(where, "daemon.state_dir", f"cannot create the lock file: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise ConfigError(
                str(state_dir),
                "daemon.state_dir",
                f"another watchdog daemon (pid {holder}) uses this state directory: stop it first, or give"
                " this one a state_dir of its own",
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # a full disk, a quota: the directory's problem, said as one (exit 78)
            raise ConfigError(
                str(state_dir),
                "daemon.state_dir",
                f"cannot write in the state directory: {exc.strerror or exc}; free space there, or give the "
                "daemon another state_dir",
            ) from exc
    except BaseException:
        os.close(fd)
        raise
    return StateDirLock(path, fd)
