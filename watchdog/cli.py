"""The command line: `watchdog replay`, `watchdog watch`; exit codes of DESIGN.md.

Heavy modules are imported inside the commands, so that `watchdog --version` starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from watchdog.exitcodes import EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["main"]

ENGINE_CHOICES = ("auto", "sglang", "vllm", "tgi", "trtllm", "llamacpp", "ollama", "generic")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse exits 2, which means "stalled" here: usage errors are 64 (EX_USAGE).
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - keep startup lean

    try:
        return version("llm-launch-watchdog")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = _Parser(
        prog="watchdog", description="Follow LLM inference-server launches and say why they fail."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    replay = sub.add_parser("replay", help="read a whole log and give the verdict")
    replay.add_argument("file", type=Path, help="the log file")
    _common(replay)

    watch = sub.add_parser("watch", help="follow a live launch until a verdict")
    watch.add_argument("target", help="a local path, ssh://[user@]host[:port]/path or [user@]host:/path")
    _common(watch)
    watch.add_argument(
        "--timeout", type=_duration, metavar="S", help="overall deadline: 90, 30s, 10m, 1h (exit 2)"
    )
    watch.add_argument(
        "--stall-after",
        type=_duration,
        default=600.0,
        metavar="S",
        help="stalled after S s without progress (default 600)",
    )
    watch.add_argument(
        "--notify", action="append", default=[], metavar="URL", help="POST the verdict as JSON to URL"
    )
    watch.add_argument("--events", type=Path, metavar="FILE", help="append every transition as a JSON line")
    watch.add_argument(
        "--pid", type=int, help="the server's pid on the host: gone without a traceback = crashed"
    )
    watch.add_argument("--process", metavar="PATTERN", help="pgrep -f pattern of the server process")
    watch.add_argument("--health", metavar="URL", help="health endpoint, probed once weights are loaded")
    watch.add_argument(
        "--gpu", action="store_true", help="poll nvidia-smi on the host: memory facts, growth is progress"
    )
    watch.add_argument(
        "--gpu-interval",
        type=_duration,
        default=5.0,
        metavar="S",
        help="seconds between GPU polls (default 5)",
    )
    watch.add_argument("--identity", type=Path, help="SSH private key")
    watch.add_argument("--known-hosts", type=Path, help="known_hosts file (default ~/.ssh/known_hosts)")
    watch.add_argument(
        "--accept-new-host-key", action="store_true", help="record an unknown host key (never a changed one)"
    )
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine", default="auto", choices=ENGINE_CHOICES, help="engine profile (default: detect)"
    )
    p.add_argument(
        "--profile",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="extra profile TOML (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON object")


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(text: str) -> float:
    """Seconds from "90", "90s", "10m" or "1.5h"."""
    number, unit = text.strip(), ""
    if number and number[-1] in "smh":
        number, unit = number[:-1], number[-1]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: use 90, 90s, 10m or 1.5h") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"watchdog {_version()}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from watchdog.exceptions import ConfigError, TargetError, UsageError  # noqa: PLC0415

    try:
        if args.command == "replay":
            return _replay(args)
        if args.command == "watch":
            from watchdog.watch import run_watch  # noqa: PLC0415

            return run_watch(args)
    except UsageError as exc:
        print(f"watchdog: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"watchdog: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except TargetError as exc:
        print(f"watchdog: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_USAGE


def _replay(args: argparse.Namespace) -> int:
    from watchdog.lifecycle import State  # noqa: PLC0415
    from watchdog.render import render_verdict, write_out  # noqa: PLC0415
    from watchdog.replay import replay_path  # noqa: PLC0415
    from watchdog.verdict import exit_code  # noqa: PLC0415

    engine = None if args.engine == "auto" else args.engine
    _analyzer, verdict = replay_path(args.file, engine, args.profile)
    if args.json:
        write_out(json.dumps(verdict, ensure_ascii=False))
    else:
        write_out(render_verdict(verdict, source=str(args.file)))
    return exit_code(State(verdict["state"]))
