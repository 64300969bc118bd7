"""The command line's parser and dispatch: every command, and the exit codes of DESIGN.md.

Heavy modules are imported inside the commands, so that `watchdog --version` starts fast. Every option
value is checked before anything starts (`watchdog.cli.options`): bad input is exit 64 or 78 with a message,
never a traceback and never 1 (which says the server crashed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import NoReturn

from watchdog.cli.options import (
    UsageParser,
    duration,
    health_url,
    pid,
    process_pattern,
    shard,
    validate_replay,
    validate_watch,
    webhook_url,
)
from watchdog.vocabulary import (
    DEFAULT_GPU_INTERVAL,
    DEFAULT_STALL_AFTER,
    ENGINE_CHOICES,
    EXIT_CONFIG,
    EXIT_CRASHED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_VERDICT,
    EXIT_READY,
    EXIT_STALLED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    RUNBOOK_URL,
    version,
)

EXAMPLE_LOG = "sglang-ep8-oom.log"  # in watchdog/examples/: 8 EP ranks, 4 of them out of memory

# What each exit code means (DESIGN.md); each command's --help lists the codes it can give, from here.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_READY: "ready: the server can serve (or was ready, then stopped cleanly)",
    EXIT_CRASHED: "crashed: the report names the root cause",
    EXIT_STALLED: "stalled (no progress for --stall-after, or its log never came), or --timeout reached",
    EXIT_NO_VERDICT: "no verdict: the log ended while still starting, or it stopped before ready",
    EXIT_USAGE: "usage error: bad command line or unreadable input file",
    EXIT_UNREACHABLE: "target unreachable: SSH connection, authentication or host key",
    EXIT_INTERNAL: "internal error: a bug in watchdog (run with --debug for the traceback)",
    EXIT_CONFIG: "configuration error: invalid config or profile file",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_codes_help(*codes: int | tuple[int, str]) -> str:
    """The `exit codes:` epilog of a command that can give these codes (a code with its own meaning there as
    `(code, meaning)`)."""
    lines = ["exit codes:"]
    for code in codes:
        number, meaning = code if isinstance(code, tuple) else (code, EXIT_MEANINGS[code])
        lines.append(f"  {number:<4}{meaning}")
    return "\n".join(lines) + "\n"


EXIT_CODES_HELP = exit_codes_help(*EXIT_MEANINGS)
_WATCH_CODES = exit_codes_help(*EXIT_MEANINGS)
_REPLAY_CODES = exit_codes_help(
    EXIT_READY, EXIT_CRASHED, EXIT_NO_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_CONFIG, EXIT_INTERRUPTED
)
_RUN_CODES = exit_codes_help(
    (EXIT_READY, "stopped: SIGTERM or SIGINT, once"),
    EXIT_USAGE,
    (EXIT_INTERNAL, EXIT_MEANINGS[EXIT_INTERNAL]),
    (EXIT_CONFIG, "configuration error: the config file, its state_dir or its listen address"),
    (EXIT_INTERRUPTED, "stopped at once: a second SIGTERM or SIGINT"),
)
_CHECK_CODES = exit_codes_help(
    (EXIT_READY, "valid (warnings, if any, on standard error)"),
    EXIT_USAGE,
    (EXIT_UNREACHABLE, "valid, but the daemon would refuse a host: its key is not in its known_hosts file"),
    (EXIT_CONFIG, "invalid: the file, the key path and what is allowed are named"),
)
_PROBE_CODES = exit_codes_help(
    (EXIT_READY, "ready: the launch can serve"),
    (EXIT_CRASHED, "crashed: the line names the root cause"),
    (EXIT_STALLED, "stalled: no progress for its stall_after or a phase deadline"),
    (EXIT_NO_VERDICT, "not ready yet: pending or a startup phase (or stopped: not serving)"),
    (EXIT_USAGE, "usage error, or the daemon follows no launch of that name"),
    (EXIT_UNREACHABLE, "the daemon cannot be reached: refused, timed out, TLS, credentials refused"),
    EXIT_INTERNAL,
    (EXIT_CONFIG, "configuration error: the --config file"),
)
_STATE_CODES = exit_codes_help(
    (EXIT_READY, "done"),
    (EXIT_USAGE, "usage error, or no state file in that state_dir"),
    EXIT_INTERNAL,
    (EXIT_CONFIG, "configuration error: the config file, or a state file that is not ours or damaged"),
)


class _Reparse(Exception):
    """A usage error the replay-only parser met: the parser of every command says it, as it always does."""


class _ReplayOnlyParser(UsageParser):
    """The parser of `watchdog replay ...` alone: the other commands' parsers import their modules, a tenth of
    a replay's start. It says nothing itself: on any usage error, the whole parser parses again."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Leave the message to the parser of every command."""
        raise _Reparse(message)

    def print_help(self, file: object = None) -> None:
        """Leave the help to the parser of every command too."""
        raise _Reparse("help")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter at each add_argument (to check its metavar), and one asks the terminal's width
        # through shutil, whose import (bz2, lzma) was a fiftieth of a replay's start; this parser prints nothing
        return argparse.HelpFormatter(prog=self.prog, width=80)


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The command line parsed as `build_parser()` parses it (the same namespace, the same messages)."""
    if argv[:1] == ["replay"]:
        parser, sub = _top_parser(_ReplayOnlyParser)
        _add_replay(sub)
        try:
            return parser.parse_args(argv)
        except _Reparse:
            pass
    return build_parser().parse_args(argv)


def _top_parser(
    parser_class: type[UsageParser],
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[UsageParser]]:
    parser = parser_class(
        prog="watchdog",
        description="Follow LLM inference-server launches and say why they fail.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    return parser, parser.add_subparsers(dest="command", parser_class=parser_class)


def _add_replay(sub: argparse._SubParsersAction[UsageParser]) -> None:
    replay = sub.add_parser(
        "replay",
        help="read a whole log and give the verdict",
        description="Read a whole log and give the verdict.",
        epilog=_REPLAY_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument(
        "file", type=Path, nargs="?", help="the log file, - for standard input (or --example)"
    )
    replay.add_argument(
        "nodes",
        type=Path,
        nargs="*",
        metavar="FILE",
        help="more logs: with FILE, the nodes of one multi-node launch (named by their file names without "
        "the extension; the first one serves), one verdict for the launch",
    )
    replay.add_argument(
        "--example", action="store_true", help=f"replay the bundled example log ({EXAMPLE_LOG}) instead"
    )
    replay.add_argument(
        "--compare-with",
        type=Path,
        metavar="FILE",
        help="the log of the launch before: say what changed since it (arguments, phases, memory)",
    )
    _common(replay)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser, sub = _top_parser(UsageParser)
    _add_replay(sub)

    run = sub.add_parser(
        "run",
        help="the daemon: follow every configured launch, serve metrics and a status page",
        description="The daemon: follow every launch of the config file, keep following after each verdict, "
        "serve /metrics, /status, /healthz and a status page, and send alerts. SIGHUP reloads the config, "
        "SIGTERM stops.",
        epilog=_RUN_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the TOML config file; LLW_SECTION__KEY variables override its keys (without it, they are the "
        "whole config)",
    )
    run.add_argument(
        "--shard",
        type=shard,
        metavar="INDEX/COUNT",
        help="follow only this replica's share of the launches (e.g. 1/3; by rendezvous hashing of their "
        "names); overrides the config's daemon.shard",
    )
    check = sub.add_parser(
        "check-config",
        help="validate a config file and print it resolved (secrets redacted)",
        description="Validate a config file, with the environment's LLW_ variables over it, and print it "
        "resolved, secrets redacted (exit 0, or 78); standard error names the keys the environment set.",
        epilog=_CHECK_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="the TOML config file; LLW_SECTION__KEY variables override its keys (without it, they are the "
        "whole config)",
    )
    schema = sub.add_parser(
        "config-schema",
        help="print the JSON Schema of the config file",
        description="Print the JSON Schema of the config file (the reference of its keys).",
    )
    schema.add_argument(
        "--markdown", action="store_true", help="print the key tables of docs/config.md instead"
    )
    history = sub.add_parser(
        "history",
        help="past launches from the daemon's state: phase durations and facts side by side",
        description="Past launches from the daemon's state: phase durations and facts side by side.",
        epilog=_STATE_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from watchdog.cli.history import add_arguments as add_history_arguments  # noqa: PLC0415 - stdlib only

    add_history_arguments(history)
    from watchdog.cli.alerts import add_silence_arguments, add_test_notify_arguments  # noqa: PLC0415

    silence = sub.add_parser(
        "silence",
        help="hold a launch's alerts for a while (or --off; none: list the silences)",
        description="Hold a launch's alerts for a while, kept in the daemon's state: `watchdog silence kimi-ep "
        "2h`; end it with --off; list the silences with no LAUNCH. Resolutions of problems already said "
        "still go out.",
        epilog=_STATE_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_silence_arguments(silence)
    test_notify = sub.add_parser(
        "test-notify",
        help="send a sample alert to one configured notifier now",
        description="Send a sample alert (the verdict of the bundled example log, marked as a test) to each "
        "URL of one [notifiers.NAME], now, and say how each went (exit 0, or 69 when one did not take it).",
    )
    add_test_notify_arguments(test_notify)
    probe = sub.add_parser(
        "probe",
        help="ask the daemon whether a launch is ready (for an exec startupProbe or a script's until)",
        description="Ask the daemon's /launches/NAME/ready whether a launch can serve, print one line "
        "(state, phase, progress) and exit by its state: 0 ready, 1 crashed, 2 stalled, 3 not ready yet "
        "(docs/readiness.md).",
        epilog=_PROBE_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from watchdog.cli.probe import add_arguments as add_probe_arguments  # noqa: PLC0415 - stdlib only

    add_probe_arguments(probe)
    rules = sub.add_parser(
        "print-rules",
        help="print the Prometheus rules (or a PrometheusRule) for your scrape job's selector",
        description="Print the recording and alerting rules of deploy/prometheus/rules/ as one rule file, "
        "for the series your Prometheus has (mixin style: every selector takes --selector).",
    )
    rules.add_argument(
        "--selector",
        metavar="MATCHERS",
        help='PromQL label matchers of the daemon\'s series (default: job="watchdog")',
    )
    rules.add_argument(
        "--runbook-url",
        metavar="URL",
        help="where the alerts' runbook_url points, each at #<alert name> (default: the project's "
        "docs/runbooks.md)",
    )
    rules.add_argument(
        "--kubernetes", action="store_true", help="print a PrometheusRule (deploy/k8s/prometheusrule.yaml)"
    )
    demo = sub.add_parser(
        "demo",
        help="three simulated launches (ready, crash, stall) watched by the full daemon",
        description="Replay three bundled real logs into temporary files at a sped-up pace (an SGLang "
        "launch that becomes ready, a vLLM crash, a launch that stalls), watched by the full daemon with its "
        "status page and metrics on localhost and alerts on the console. Ends after the verdicts.",
    )
    demo.add_argument("--forever", action="store_true", help="keep serving after the verdicts (Ctrl-C ends)")
    demo.add_argument(
        "--listen", default="127.0.0.1:0", metavar="HOST:PORT", help="where to serve (default: a free port)"
    )
    from watchdog.cli import shipped  # noqa: PLC0415 - stdlib only

    print_unit = sub.add_parser(
        "print-unit",
        help="print the systemd unit, its ExecStart this install's llm-launch-watchdog script",
        description="Print the systemd unit llm-launch-watchdog.service as this release ships it, its "
        "ExecStart set to this install's llm-launch-watchdog script: `llm-launch-watchdog print-unit | sudo "
        "tee /etc/systemd/system/llm-launch-watchdog.service` (docs/operations.md).",
    )
    shipped.add_print_unit_arguments(print_unit)
    sub.add_parser(
        "print-config",
        help="print the complete, commented example config",
        description="Print the complete, commented example config (deploy/config.example.toml): every key.",
    ).set_defaults(handler=shipped.run_print_config)
    sub.add_parser(
        "print-forced-command",
        help="print the SSH forced-command wrapper for the GPU hosts",
        description="Print this release's SSH forced-command wrapper (llm-launch-watchdog-forced-command), "
        "which lets the daemon's key run watchdog's own commands on a GPU host and nothing else "
        "(docs/least-privilege.md).",
    ).set_defaults(handler=shipped.run_print_forced_command)

    watch = sub.add_parser(
        "watch",
        help="follow a live launch until a verdict",
        description="Follow a live launch until a verdict.",
        epilog=_WATCH_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    watch.add_argument(
        "target",
        help="a local path, ssh://[user@]host[:port]/path, [user@]host:/path, - (standard input), "
        "docker://[[user@]host[:port]/]CONTAINER, podman://..., journald://[[user@]host[:port]/]UNIT, "
        "k8s://[CONTEXT/]NAMESPACE/POD[/CONTAINER]",
    )
    watch.add_argument(
        "nodes",
        nargs="*",
        metavar="TARGET",
        help="more targets: with TARGET, the nodes of one multi-node launch (one verdict: ready when the "
        "serving node is, crashed when any node crashes, naming the node and rank that failed first); a "
        "node is named by its host, else by its file's name",
    )
    watch.add_argument(
        "--serve",
        metavar="NAME",
        help="with several targets: the node whose engine serves (default: the first TARGET)",
    )
    _common(watch)
    _follow_options(watch, process=True)
    from watchdog.cli.launch import add_arguments as add_launch_arguments  # noqa: PLC0415 - stdlib only

    launch = sub.add_parser(
        "launch",
        help="start a server detached on a host, then follow it as watch does",
        description="Start COMMAND detached on TARGET (its own session and process group, stdin from "
        "/dev/null, stdout and stderr appended to --log, its pid written to LOG.pid), then follow its log from "
        "where this run's bytes begin, with its pid as process evidence, as `watch` does (docs/launch-mode.md).",
        epilog=exit_codes_help(
            *(code for code in EXIT_MEANINGS if code != EXIT_USAGE),
            (EXIT_USAGE, "usage error, or the command could not be started (not found on the host, ...)"),
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_launch_arguments(launch)
    _common(launch)
    _follow_options(launch, process=False)
    from watchdog.cli import control  # noqa: PLC0415 - stdlib only

    control_codes = exit_codes_help(
        (EXIT_READY, "done"),
        (EXIT_USAGE, "usage error, or refused: no such launch, no command, (not) running, cannot start"),
        (EXIT_UNREACHABLE, "the daemon cannot be reached or refused the credentials, or the launch's host"),
        EXIT_CONFIG,
    )
    for action, said in (("start", "start a launch's command"), ("stop", "stop a launch's command")):
        command = sub.add_parser(
            action,
            help=f"ask the running daemon to {said} (launch mode)",
            description=f"Ask the running daemon to {said} on its host: POST /launches/NAME/{action} "
            "(docs/launch-mode.md)."
            + (
                " A stop sends SIGTERM to its process group, then SIGKILL after its stop_grace; its verdict is "
                "stopped."
                if action == "stop"
                else " Refused while its last run still runs, unless --replace."
            ),
            epilog=control_codes,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        control.add_arguments(command, start=action == "start")
        command.set_defaults(handler=partial(control.run_control, action=action))
    return parser


def _follow_options(p: argparse.ArgumentParser, *, process: bool) -> None:
    """The options of a command that follows a live launch (`watch`, `launch`); `process`: --pid and
    --process (`launch` knows its pid)."""
    p.add_argument(
        "--timeout", type=duration, metavar="S", help="overall deadline: 90, 30s, 10m, 1h (exit 2)"
    )
    p.add_argument(
        "--stall-after",
        type=duration,
        default=DEFAULT_STALL_AFTER,
        metavar="S",
        help=f"stalled after S s without progress (default {DEFAULT_STALL_AFTER:g})",
    )
    p.add_argument(
        "--notify",
        action="append",
        type=webhook_url,
        default=[],
        metavar="URL",
        help="POST the verdict as JSON to this http(s) URL (repeatable)",
    )
    p.add_argument("--events", type=Path, metavar="FILE", help="append every transition as a JSON line")
    p.add_argument(
        "--compare-with",
        type=Path,
        metavar="FILE",
        help="the log of the launch before: say what changed since it (arguments, phases, memory)",
    )
    if process:
        p.add_argument(
            "--pid", type=pid, help="the server's pid on the host: gone without a traceback = crashed"
        )
        p.add_argument(
            "--process",
            type=process_pattern,
            metavar="PATTERN",
            help="pgrep -f pattern of the server process",
        )
    p.add_argument(
        "--health", type=health_url, metavar="URL", help="health endpoint, probed once weights are loaded"
    )
    p.add_argument(
        "--gpu", action="store_true", help="poll nvidia-smi on the host: memory facts, growth is progress"
    )
    p.add_argument(
        "--gpu-interval",
        type=duration,
        default=DEFAULT_GPU_INTERVAL,
        metavar="S",
        help=f"seconds between GPU polls (default {DEFAULT_GPU_INTERVAL:g})",
    )
    p.add_argument("--identity", type=Path, help="SSH private key")
    p.add_argument("--known-hosts", type=Path, help="known_hosts file (default ~/.ssh/known_hosts)")
    p.add_argument(
        "--accept-new-host-key", action="store_true", help="record an unknown host key (never a changed one)"
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        default="auto",
        metavar="ENGINE",
        help=f"engine profile: {', '.join(ENGINE_CHOICES)} (default: detect), or a --profile file's `name`",
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
    # Also after the command; SUPPRESS keeps a `watchdog --debug replay ...` from being reset to False.
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an internal error",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Args:
        argv: the arguments after the program name (default: `sys.argv[1:]`).

    Returns:
        The exit code: a verdict (0-3), a usage (64), reachability (69) or configuration (78) error,
        an internal error (70), or 130 after Ctrl-C.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if argv is None and arguments[:1] == ["replay"]:
        # The program's own replay runs without the cyclic garbage collector: what it makes is freed by reference
        # counts (a replay leaves no cycle: tests/test_cli_replay.py), and the collector's passes over the objects
        # of its start (modules, classes, profile), which all live to its end, were a fortieth of a 1M-line replay.
        gc.disable()
        # Its regexes and dataclasses' methods as the run before compiled them (watchdog.cli.startcache): set
        # before the imports of the replay, whose module constants and classes are most of them.
        from watchdog.cli.startcache import keep_compiles  # noqa: PLC0415

        save_compiles = keep_compiles()
        code = _run(arguments)
        _flush()
        save_compiles()  # after the verdict is out: a run that compiled anything new writes them
        _exit_now(code)
    return _run(arguments)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        # a reader gone, or a stream closed: the exit code still says it
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _exit_now(code: int) -> NoReturn:
    """End this process with `code` once its output is flushed, without the interpreter's teardown.

    For the program's own replay only (not a caller's `main([...])`): it holds nothing to release (no thread, no
    file open for writing, no exit hook), and tearing down its ~150 modules took as long as reading 40 MB of log
    (a twentieth of a replay of 1M lines).
    """
    _flush()
    os._exit(code)


def _run(arguments: list[str]) -> int:
    try:
        return _main(arguments)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is not None:
            return EXIT_INTERRUPTED
        from watchdog.exceptions import first_watchdog_error  # noqa: PLC0415

        ours = first_watchdog_error(group)
        if ours is not None:  # the daemon's or a task's own error: its exit code, not an internal error
            return _report(ours)
        if not isinstance(group, Exception):
            raise  # a group of SystemExit or the like: not ours to report
        return _internal_error(group, _wants_debug(arguments))
    except Exception as exc:
        return _internal_error(exc, _wants_debug(arguments))


def _main(argv: list[str]) -> int:
    args = parse_arguments(argv)
    if args.version:  # under the name it was called by: `llm-launch-watchdog` is the same command
        called = Path(sys.argv[0]).name
        print(f"{called if called == 'llm-launch-watchdog' else 'watchdog'} {version()}")
        return 0
    if args.command is None:
        build_parser().print_help(sys.stderr)
        return EXIT_USAGE
    from watchdog.exceptions import ConfigError, TargetError, UsageError  # noqa: PLC0415

    try:
        if "handler" in args:  # a command whose module the parser imported sets its own handler
            handler: Callable[[argparse.Namespace], int] = args.handler
            return handler(args)
        if args.command == "replay":
            validate_replay(args)
            return _replay(args)
        if args.command == "watch":
            for warning in validate_watch(args):
                print(f"watchdog: {warning}", file=sys.stderr)
            from watchdog.cli.watch import run_watch  # noqa: PLC0415

            return run_watch(args)
        if args.command == "launch":
            from watchdog.cli.launch import run_launch  # noqa: PLC0415

            return run_launch(args)
        if args.command == "run":
            from watchdog.daemon import hangup  # noqa: PLC0415

            hangup.hold()  # before the config and the daemon's libraries: a SIGHUP now is a reload, not death
            _config_given(args.config)
            from watchdog.daemon.logs import import_structlog_without_rich  # noqa: PLC0415

            import_structlog_without_rich()  # before the daemon's modules import it: no rich in the daemon
            from watchdog.daemon.service import run_daemon  # noqa: PLC0415 - the daemon's libraries only when run

            return run_daemon(args.config, shard=args.shard)
        if args.command == "check-config":
            from watchdog.cli.checkconfig import check_config_main  # noqa: PLC0415

            _config_given(args.file)
            return check_config_main(args.file)
        if args.command == "config-schema":
            from watchdog.cli.checkconfig import config_schema_main  # noqa: PLC0415

            return config_schema_main(markdown=args.markdown)
        if args.command == "print-rules":
            from watchdog.daemon import promrules  # noqa: PLC0415

            render = promrules.prometheus_rule if args.kubernetes else promrules.combined
            selector = promrules.DEFAULT_SELECTOR if args.selector is None else args.selector
            base = RUNBOOK_URL if args.runbook_url is None else args.runbook_url
            print(render(selector, base), end="")
            return 0
        if args.command == "demo":
            from watchdog.cli.demo import run_demo  # noqa: PLC0415

            return run_demo(forever=args.forever, listen=args.listen)
    except (UsageError, ConfigError, TargetError) as exc:
        return _report(exc)
    return EXIT_USAGE


def _config_given(path: Path | None) -> None:
    """A config file, or the config's variables in the environment (a container's whole config): else a
    usage error."""
    from watchdog.config.environment import config_variables  # noqa: PLC0415
    from watchdog.exceptions import UsageError  # noqa: PLC0415

    if path is None and not config_variables(os.environ):
        raise UsageError(
            "no config: give the config file (--config FILE for run), or set the config in LLW_SECTION__KEY "
            "environment variables (docs/config.md, From the environment)"
        )


def _report(exc: Exception) -> int:
    """Say one of our errors in one line; its exit code (64 usage, 78 configuration, 69 unreachable)."""
    from watchdog.exceptions import ConfigError, TargetError, UsageError  # noqa: PLC0415

    if isinstance(exc, ConfigError):
        print(f"watchdog: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"watchdog: {exc}", file=sys.stderr)
    if isinstance(exc, TargetError):
        return EXIT_UNREACHABLE
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    return EXIT_INTERNAL


def _wants_debug(argv: list[str]) -> bool:
    """Whether --debug was given: read from the raw arguments, since parsing itself may have failed."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "--debug" in options


def _internal_error(exc: BaseException, debug: bool) -> int:
    """Report a bug: the traceback with --debug, else one line that says how to get it."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]  # a task group's wrapper says nothing: name what went wrong inside
    message = " ".join(str(leaf).split())
    line = f"watchdog: internal error: {type(leaf).__name__}" + (f": {message}" if message else "")
    try:
        if debug:
            import traceback  # noqa: PLC0415 - only for a bug's report

            traceback.print_exception(exc, file=sys.stderr)
            print(line, file=sys.stderr)
        else:
            print(f"{line} (run with --debug for the traceback)", file=sys.stderr)
    except OSError:
        pass  # stderr is gone: the exit code still says it
    return EXIT_INTERNAL


def _heap_for_blocks() -> None:
    # A replay reads its log a megabyte at a time, and makes a copy or two of each block. glibc's malloc serves
    # such a block by mmap, or from its heap and gives the heap's free top back to the kernel, until a block as
    # big is freed (its thresholds rise with the biggest block freed so far); each megabyte's pages are then
    # faulted in again, read after read (16,000 page faults in a replay of 1M lines, a tenth of its CPU, or
    # none: it depends on what else the heap holds). One block of 8 MiB made and freed now raises them for good:
    # the blocks come from the heap, and up to 16 MiB of it stays free for the next ones. Other allocators: an
    # allocation of untouched pages (calloc), freed at once.
    block = bytes(8 << 20)
    del block


def _replay(args: argparse.Namespace) -> int:
    from watchdog.cli.render import render_verdict, write_out  # noqa: PLC0415
    from watchdog.core.verdict import exit_code  # noqa: PLC0415
    from watchdog.follow.databases import keep_prefilter_databases  # noqa: PLC0415
    from watchdog.follow.replay import replay_path  # noqa: PLC0415

    keep_prefilter_databases()
    _heap_for_blocks()
    engine = None if args.engine == "auto" else args.engine
    if args.nodes:  # several logs: the nodes of one launch
        from watchdog.follow.replay import replay_nodes  # noqa: PLC0415

        paths = [args.file, *args.nodes]
        verdict = replay_nodes(paths, engine, args.profile)
        source = " ".join(str(p) for p in paths)
        write_out(
            json.dumps(verdict.to_json(), ensure_ascii=False)
            if args.json
            else render_verdict(verdict, source=source)
        )
        return exit_code(verdict.state, verdict.phase)
    if args.example:
        # importlib.resources only here: its import (zipfile, tempfile, shutil) costs a user's replay a tenth of
        # its start
        from importlib import resources  # noqa: PLC0415

        with resources.as_file(resources.files("watchdog") / "examples" / EXAMPLE_LOG) as path:
            _analyzer, verdict = replay_path(path, engine, args.profile, compare_with=args.compare_with)
    else:
        _analyzer, verdict = replay_path(args.file, engine, args.profile, compare_with=args.compare_with)
    source = EXAMPLE_LOG if args.example else str(args.file)
    write_out(
        json.dumps(verdict.to_json(), ensure_ascii=False)
        if args.json
        else render_verdict(verdict, source=source)
    )
    return exit_code(verdict.state, verdict.phase)
