"""Command-line option values: parse and validate them, so bad input is refused before anything starts."""

from __future__ import annotations

import argparse
import functools
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypeVar

from watchdog.exceptions import UsageError
from watchdog.vocabulary import (
    EXIT_USAGE,
    check_http_url,
    check_pattern,
    check_process,
    file_kind,
    parse_duration,
    parse_pid,
)

if TYPE_CHECKING:
    from watchdog.config.shard import Shard

_T = TypeVar("_T")

# Reading an input file must never block: a FIFO without a writer would hang `open` itself.
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


def duration(text: str) -> float:
    """Parse a duration option (`--timeout`, `--stall-after`, `--gpu-interval`): the grammar of the config
    file (`watchdog.vocabulary.parse_duration`: 90, 90s, 10m, 1h30m, 1.5h, 2d).

    Raises:
        argparse.ArgumentTypeError: not a duration, or NaN, infinite, 0 or negative.
    """
    return _option(parse_duration, text)


def _option(check: Callable[[str], _T], text: str) -> _T:
    """`check(text)`, its ValueError said as argparse says an option's problem (with our message)."""
    try:
        return check(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def pid(text: str) -> int:
    """Parse a `--pid` option: a Linux process id (`watchdog.vocabulary.parse_pid`).

    Raises:
        argparse.ArgumentTypeError: not a decimal number, or outside the range any Linux pid can take.
    """
    return _option(parse_pid, text)


def process_pattern(text: str) -> str:
    """Parse a `--process` option: a `pgrep -f` pattern, unchanged.

    Raises:
        argparse.ArgumentTypeError: it is empty or blank, or holds a line break or a NUL character.
    """
    return _option(check_pattern, text)


def webhook_url(text: str) -> str:
    """Parse a `--notify` option: a webhook URL, checked now rather than when the verdict is sent.

    Messages never show the URL's path, query or user information: webhook URLs carry their token there.

    Args:
        text: the URL.

    Returns:
        `text`, unchanged.

    Raises:
        argparse.ArgumentTypeError: not an http(s) URL with a host and a port from 1 to 65535.
    """
    return _option(functools.partial(check_http_url, secret=True), text)


def health_url(text: str) -> str:
    """Parse a `--health` option: the server's health endpoint.

    Args:
        text: the URL.

    Returns:
        `text`, unchanged.

    Raises:
        argparse.ArgumentTypeError: not an http(s) URL with a host and a port from 1 to 65535.
    """
    return _option(functools.partial(check_http_url, secret=False), text)


def validate_replay(args: argparse.Namespace) -> None:
    """Check the options of `watchdog replay` that argparse cannot check alone.

    Args:
        args: the parsed command line.

    Raises:
        UsageError: neither or both of FILE and --example; a profile file that cannot be read.
        ConfigError: a profile file that is not a valid profile.
    """
    if (args.file is None) == (not args.example):
        raise UsageError("replay needs a log FILE or --example (exactly one of them)")
    if args.nodes and "-" in (str(args.file), *map(str, args.nodes)):
        raise UsageError("replay of several logs (the nodes of one launch) reads files, not standard input")
    _check_profiles(args.engine, args.profile)


def validate_watch(args: argparse.Namespace) -> list[str]:
    """Check the options of `watchdog watch` that argparse cannot check alone, before anything starts.

    Args:
        args: the parsed command line.

    Returns:
        Warnings for stderr: things that look wrong but may be right, such as a target whose
        directory does not exist yet.

    Raises:
        UsageError: a malformed TARGET; a local TARGET that is a FIFO, a device or a directory;
            --pid with --process; an --events file that cannot be written; an --identity,
            --known-hosts or --profile file that cannot be read.
        ConfigError: a profile file that is not a valid profile.
    """
    from watchdog.follow.sources.target import parse_target  # noqa: PLC0415 - imports the SSH stack

    try:
        check_process(args.pid, args.process, None, names=("--pid", "--process", "--pid-file"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    warnings = []
    for text in (args.target, *args.nodes):
        target = parse_target(text)
        if target.kind == "file" and not target.is_remote:
            warnings += _check_local_target(target.path)
    if args.nodes:
        _check_nodes(args)
    elif args.serve is not None:
        raise UsageError("--serve names the serving node of several targets: give more than one TARGET")
    _check_profiles(args.engine, args.profile)
    if args.identity is not None:
        _check_input_file(args.identity, "--identity", "an SSH private key file")
    if args.known_hosts is not None:
        known_hosts = Path(os.path.expanduser(args.known_hosts))
        if not (args.accept_new_host_key and not known_hosts.exists()):
            _check_input_file(
                known_hosts,
                "--known-hosts",
                "a known_hosts file",
                missing="; --accept-new-host-key creates it",
            )
    if args.events is not None:
        _check_events(args.events)
    return warnings


def node_names(targets: list[str]) -> list[str]:
    """The names of `watch`'s nodes, one per target: its host, else its path's file name without the
    extension, else node<i>; a name taken twice gets its index (`gpu1-2`)."""
    from watchdog.follow.sources.target import parse_target  # noqa: PLC0415 - imports the SSH stack

    names = []
    for index, text in enumerate(targets):
        target = parse_target(text)
        name = target.host or PurePosixPath(target.path).stem or f"node{index}"
        names.append(name if name not in names else f"{name}-{index}")
    return names


def _check_nodes(args: argparse.Namespace) -> None:
    # several targets: the nodes of one launch
    targets = [args.target, *args.nodes]
    if "-" in targets:
        raise UsageError("standard input (-) is one log: several targets are the nodes' logs")
    if args.pid is not None:
        raise UsageError("--pid is one host's process: with several targets, use --process (each node's)")
    names = node_names(targets)
    if args.serve is not None and args.serve not in names:
        raise UsageError(f"--serve {args.serve!r} is not a node; the nodes are {', '.join(names)}")


def _check_profiles(engine: str, profiles: list[Path]) -> None:
    from watchdog.profiles.loader import load_profile, load_profile_file  # noqa: PLC0415 - not for --version

    for path in profiles:
        _check_input_file(path, "--profile", "a profile (TOML) file")
        load_profile_file(path)
    if engine != "auto":
        load_profile(engine, profiles)


def _check_input_file(path: Path, option: str, what: str, *, missing: str = "") -> None:
    """A file the watcher will read: it exists, is a regular file, and can be opened for reading."""
    where = Path(os.path.expanduser(path))
    try:
        fd = os.open(where, _READ_FLAGS)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file{missing}") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read: {exc.strerror or exc}") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    if kind is not None:
        raise UsageError(f"{option} {path}: {kind}, not {what}")


def _check_local_target(text: str) -> list[str]:
    """A local log: a regular, readable file, or not there yet (the launch may not have started)."""
    path = os.path.expanduser(text)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(parent):
            return []
        return [f"warning: directory {parent} does not exist (yet): waiting for {text} to appear"]
    except OSError as exc:
        raise UsageError(f"cannot follow {text}: {exc.strerror or exc}") from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise UsageError(f"cannot follow {text}: {kind}, not a regular log file")
    try:
        os.close(os.open(path, _READ_FLAGS))
    except OSError as exc:
        raise UsageError(f"cannot read {text}: {exc.strerror or exc}") from None
    return []


def _check_events(path: Path) -> None:
    """The --events file: appendable now, or creatable in an existing directory (left as it was found)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"--events {path}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"--events {path}: a directory; give a file to append JSON lines to")
        try:
            # Non-blocking, so that a FIFO nobody reads is an error now rather than a hang later.
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK))
        except OSError as exc:
            raise UsageError(f"--events {path}: cannot write: {exc.strerror or exc}") from None
        return
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"--events {path}: directory {parent} does not exist")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:
        return  # someone created it meanwhile: it will be appended to
    except OSError as exc:
        raise UsageError(f"--events {path}: cannot create: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(path)


def shard(text: str) -> Shard:
    """Parse `--shard INDEX/COUNT` (e.g. "1/3": this replica follows shard 1 of 3).

    Raises:
        argparse.ArgumentTypeError: not INDEX/COUNT with 0 <= INDEX < COUNT <= 1024.
    """
    from watchdog.config.shard import InvalidShard, parse_shard  # noqa: PLC0415

    try:
        return parse_shard(text)
    except InvalidShard as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class UsageParser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit 64 (EX_USAGE): argparse's 2 means "stalled" here."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the usage and the problem, then exit 64."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
