"""`watchdog launch`: start a server detached on a host, then follow it as `watch` does, with its pid known.

TARGET names the host only: `local` (this machine), `ssh://[user@]host[:port]` or `[user@]host:` (the colon
says it is a host; nothing after it). The log (`--log`) is a path on that host, relative paths in the login
directory as a remote `watch` target's. The command (after `--`) is started by `watchdog.follow.launching`:
every word passed as given; then the follower reads the log from the size it had before the start, so the
verdict is this run's, never an older run's in the same log.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from watchdog.cli.options import duration
from watchdog.exceptions import StartFailed, UsageError

if TYPE_CHECKING:
    from watchdog.follow.follower import Concluded
    from watchdog.follow.launching import LaunchCommand
    from watchdog.follow.sources.commands import Runner
    from watchdog.follow.sources.target import Target

__all__ = ["LOCAL", "add_arguments", "launch", "parse_host", "prepare", "run_launch"]

LOCAL = "local"  # the TARGET that names this machine
_HOST_FORMS = f"{LOCAL} (this machine), ssh://[user@]host[:port] or [user@]host: (a host, its trailing colon)"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_pair(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not _ENV_NAME.match(key):
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (KEY: letters, digits and _)")
    if "\0" in value:
        raise argparse.ArgumentTypeError("an environment value may not contain NUL characters")
    return key, value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of `watchdog launch` (the follow options are `watch`'s, added by the caller)."""
    p.add_argument("target", metavar="TARGET", help=f"where to start it: {_HOST_FORMS}")
    p.add_argument(
        "--log",
        required=True,
        metavar="PATH",
        help="the log on that host its output is appended to (its pid goes to PATH.pid)",
    )
    p.add_argument("--cwd", metavar="DIR", help="its working directory (default: the login directory)")
    p.add_argument(
        "--env",
        action="append",
        type=_env_pair,
        default=[],
        metavar="KEY=VALUE",
        help="set this in its environment (repeatable)",
    )
    p.add_argument(
        "--kill-on-crash",
        action="store_true",
        help="on a crash verdict end its whole process group (SIGTERM, then SIGKILL after --stop-grace)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="stop the run whose pid is in PATH.pid first, if it still runs (else its running is an error)",
    )
    p.add_argument(
        "--stop-grace",
        type=duration,
        default=None,
        metavar="S",
        help="seconds from SIGTERM to SIGKILL when a process group is ended (default 30)",
    )
    p.add_argument("argv", nargs="+", metavar="-- COMMAND ARGS", help="the server's command line")


def parse_host(text: str) -> tuple[str, str | None, int | None] | None:
    """The host (address, user, port) a launch TARGET names; None for `local`.

    Raises:
        UsageError: not one of the forms; the message lists them.
    """
    from watchdog.follow.sources.target import parse_target  # noqa: PLC0415 - its checks of host and user

    if text == LOCAL:
        return None
    if text.lower().startswith("ssh://"):
        rest = text[len("ssh://") :].rstrip("/")
        if not rest or "/" in rest:
            raise UsageError(f"launch target {text!r} names a path: give the host only ({_HOST_FORMS})")
        target = parse_target(f"ssh://{rest}/x")
    elif text.endswith(":") and "/" not in text:
        target = parse_target(f"{text}x")  # `[user@]host:x`, parsed and checked as a `watch` target
    else:
        raise UsageError(f"launch target {text!r} is not a host; expected {_HOST_FORMS}")
    if target.host is None:
        raise UsageError(f"launch target {text!r} is not a host; expected {_HOST_FORMS}")
    return target.host, target.user, target.port


def _log_target(host: tuple[str, str | None, int | None] | None, log: str) -> Target:
    from watchdog.follow.sources.target import Target  # noqa: PLC0415
    from watchdog.vocabulary import remote_relative  # noqa: PLC0415

    if not log or log.endswith("/") or "\0" in log or "\n" in log:
        raise UsageError(f"--log {log!r} is not a log file's path")
    if host is None:
        return Target(None, None, None, os.path.abspath(os.path.expanduser(log)))
    return Target(host[0], host[1], host[2], remote_relative(log))


def prepare(args: argparse.Namespace) -> list[str]:
    """Check `launch`'s arguments before anything starts, and set `args.host` (the TARGET's host, None for this
    machine) and `args.target` (the log's target, as `watch` names it); return warnings for stderr.

    Raises:
        UsageError: a malformed TARGET or --log, or a follow option `watch` would refuse.
        ConfigError: a --profile that is not a valid profile.
    """
    from watchdog.cli.options import validate_watch  # noqa: PLC0415

    host = parse_host(args.target)
    log = _log_target(host, args.log)
    # the follow options are checked as `watch` checks them, on the log's target
    args.host, args.target, args.pid, args.process = host, str(log), None, None
    args.nodes, args.serve = [], None  # one node: the host it starts on
    # a log whose directory does not exist yet: the start says so (a log that is not there yet is created)
    return [w for w in validate_watch(args) if "does not exist" not in w]


def run_launch(args: argparse.Namespace) -> int:
    """The `launch` command: returns the exit code."""
    from watchdog.cli.watch import run_watch  # noqa: PLC0415

    for warning in prepare(args):
        print(f"watchdog: {warning}", file=sys.stderr)
    return run_watch(args, main=launch)


def _command(args: argparse.Namespace, log: Target) -> LaunchCommand:
    from watchdog.follow.launching import LaunchCommand  # noqa: PLC0415

    try:
        return LaunchCommand(tuple(args.argv), log.path, cwd=args.cwd, env=tuple(args.env))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


async def launch(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Start the command `args` describe, then follow it until a verdict; print it; return the exit code.

    Raises:
        StartFailed: the command could not be started (not found there, a directory that cannot be entered),
            or a run started before still runs and --replace was not given.
    """
    from dataclasses import replace  # noqa: PLC0415

    from watchdog.cli.render import write_out  # noqa: PLC0415
    from watchdog.cli.watch import follow, open_pool, spec_from_args  # noqa: PLC0415
    from watchdog.follow.launching import kill_group, read_pid, start  # noqa: PLC0415
    from watchdog.follow.sources.commands import LocalRunner, SSHRunner  # noqa: PLC0415
    from watchdog.vocabulary import DEFAULT_STOP_GRACE, State  # noqa: PLC0415

    spec = spec_from_args(args)
    command = _command(args, spec.target)
    grace = DEFAULT_STOP_GRACE if args.stop_grace is None else args.stop_grace
    added: dict[str, Any] = {}

    def say(line: str) -> None:
        if not args.json:
            write_out(line, out)

    async with open_pool(args, spec.target.is_remote) as pool:
        runner: Runner = (
            LocalRunner()
            if args.host is None
            else SSHRunner(pool, args.host[0], port=args.host[2], user=args.host[1])
        )
        previous = await read_pid(runner, command.pid_file)
        if previous is not None:
            if not args.replace:
                raise StartFailed(
                    f"a run started before (pid {previous}, in {command.pid_file} on {runner.where}) still runs: "
                    "stop it, or give --replace",
                    host=runner.where,
                )
            replaced = await kill_group(runner, previous, grace=grace)
            added["replaced"] = replaced.to_json()
            say(f"replaced: {replaced}")
        started = await start(runner, command)
        added["started"] = started.to_json(command.pid_file)
        say(
            f"started pid {started.pid} (its own process group) on {runner.where}; its pid is in {command.pid_file}"
        )

        async def on_verdict(concluded: Concluded) -> tuple[dict[str, Any], list[str]]:
            if not (args.kill_on_crash and concluded.state is State.CRASHED):
                return added, []
            killed = await kill_group(runner, started.pid, grace=grace)
            return {**added, "killed": killed.to_json()}, [f"killed: {killed}"]

        return await follow(
            args,
            replace(spec, pid=started.pid),
            pool,
            out,
            label=args.target,
            offset=started.offset,
            on_verdict=on_verdict,
        )
