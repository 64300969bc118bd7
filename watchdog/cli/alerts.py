"""`watchdog silence` and `watchdog test-notify`: the alert commands an operator runs beside the daemon."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from watchdog.alerts.alert import AlertKind
from watchdog.exceptions import DeliveryError, UsageError
from watchdog.vocabulary import DEFAULT_STATE_DIR, EXIT_UNREACHABLE, format_duration

if TYPE_CHECKING:
    from watchdog.alerts.notifiers import Alert
    from watchdog.alerts.senders import Notifier

EXAMPLE_LOG = "sglang-ep8-oom.log"  # in watchdog/examples/ (as `watchdog replay --example`)
TEST_NOTE = "A test alert from `watchdog test-notify`: nothing crashed."


def add_silence_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `watchdog silence`."""
    parser.add_argument("launch", nargs="?", metavar="LAUNCH", help="the launch (none: list the silences)")
    parser.add_argument("duration", nargs="?", metavar="DURATION", help='how long: "2h", "30m", "1d"')
    parser.add_argument("--off", action="store_true", help="end the launch's silence")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--config", type=Path, metavar="FILE", help="the daemon's config (its state_dir)")
    group.add_argument(
        "--state-dir", metavar="DIR", help=f"the daemon's state_dir (default {DEFAULT_STATE_DIR})"
    )
    parser.set_defaults(handler=run_silence)


def add_test_notify_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `watchdog test-notify`."""
    parser.add_argument("name", metavar="NAME", help="a [notifiers.NAME] of the config")
    parser.add_argument("--config", type=Path, required=True, metavar="FILE", help="the TOML config file")
    parser.add_argument(
        "--kind",
        default="crashed",
        choices=tuple(kind.value for kind in AlertKind),
        help="the kind of alert to send (default: crashed)",
    )
    parser.set_defaults(handler=run_test_notify)


def run_silence(args: argparse.Namespace) -> int:
    """`watchdog silence`: add, end or list silences; 0, or raises UsageError / ConfigError."""
    import anyio  # noqa: PLC0415 - not for `watchdog --help`

    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.store import open_store  # noqa: PLC0415
    from watchdog.vocabulary import parse_duration  # noqa: PLC0415

    state_dir = args.state_dir or DEFAULT_STATE_DIR
    if args.config is not None:
        config = load_config(args.config)
        state_dir = config.daemon.state_dir
        if args.launch is not None and args.launch not in config.launches:
            known = ", ".join(sorted(config.launches)) or "none"
            raise UsageError(f"no launch {args.launch!r} in {args.config}; its launches: {known}")
    if args.launch is None:
        if args.duration is not None or args.off:
            raise UsageError("give the LAUNCH to silence (watchdog silence LAUNCH 2h)")
    elif args.off == (args.duration is not None):
        raise UsageError("give a DURATION (watchdog silence LAUNCH 2h) or --off, one of them")
    seconds = 0.0
    if args.duration is not None:
        try:
            seconds = parse_duration(args.duration)
        except ValueError as exc:
            raise UsageError(f"DURATION {args.duration!r}: {exc}") from None

    async def act() -> dict[str, float]:
        async with open_store(state_dir) as store:
            if args.launch is not None and args.off:
                await store.remove_silence(args.launch)
            elif args.launch is not None:
                await store.add_silence(args.launch, time.time() + seconds)
            return await store.silences()

    silences = anyio.run(act)
    if args.launch is not None and args.off:
        print(f"{args.launch}: silence ended")
    elif args.launch is not None:
        print(
            f"{args.launch}: alerts silenced for {format_duration(seconds)}, until {_iso(silences[args.launch])}"
        )
    elif not silences:
        print("no launch is silenced")
    else:
        now = time.time()
        for launch, until in sorted(silences.items()):
            print(f"{launch}: silenced until {_iso(until)} ({format_duration(until - now)} left)")
    return 0


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sample_alert(kind: str = "crashed", *, link: str = "") -> Alert:
    """A realistic alert of `kind`: the verdict of the bundled example log (8 ranks, 4 out of memory), marked
    as a test in its detail."""
    from watchdog.alerts.notifiers import Alert, AlertKind  # noqa: PLC0415
    from watchdog.core.verdict import Status  # noqa: PLC0415
    from watchdog.follow.replay import replay_path  # noqa: PLC0415

    with resources.as_file(resources.files("watchdog") / "examples" / EXAMPLE_LOG) as path:
        _analyzer, verdict = replay_path(path, None, ())
    status = Status(verdict, name="watchdog-test", host="example-gpu-host", labels=(("test", "true"),))
    alert_kind = AlertKind(kind)
    if alert_kind is AlertKind.RESOLVED:
        alert = Alert.from_status(AlertKind.CRASHED, status, link=link).resolution(
            datetime.now(UTC), TEST_NOTE
        )
    else:
        alert = Alert.from_status(alert_kind, status, link=link, detail=TEST_NOTE)
    # said where every service shows it: the summary (the detail is not shown for every kind)
    return dataclasses.replace(alert, detail=TEST_NOTE, summary=f"[TEST] {alert.summary or alert.title}")


def run_test_notify(args: argparse.Namespace) -> int:
    """`watchdog test-notify NAME`: 0 when every URL took the sample, 69 when one did not."""
    import anyio  # noqa: PLC0415 - not for `watchdog --help`

    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.daemon.service import notifier_from  # noqa: PLC0415

    config = load_config(args.config)
    if args.name not in config.notifiers:
        known = ", ".join(sorted(config.notifiers)) or "none"
        raise UsageError(f"no notifier {args.name!r} in {args.config}; its notifiers: {known}")
    notifier = notifier_from(args.name, config)
    kind = config.notifiers[args.name].kind
    base = config.daemon.public_url or f"http://{config.daemon.listen}"
    alert = sample_alert(args.kind, link=f"{base}/")
    results = anyio.run(_send_all, notifier, alert)
    failed = 0
    for index, problem in enumerate(results):
        where = f"notifiers.{args.name} ({kind}) URL {index + 1}/{len(results)}"
        if problem is None:
            print(f"{where}: delivered a sample {args.kind} alert")
        elif problem == "":
            print(f"{where}: {kind} takes no {args.kind} alert (nothing sent)")
        else:
            failed += 1
            print(f"{where}: not delivered: {problem}", file=sys.stderr)
    return EXIT_UNREACHABLE if failed else 0


async def _send_all(notifier: Notifier, alert: Alert) -> list[str | None]:
    from watchdog.alerts.delivery import open_client  # noqa: PLC0415

    results: list[str | None] = []
    async with open_client() as client:
        for destination in range(notifier.destinations):
            try:
                said = await notifier.send(alert, destination, client)
            except DeliveryError as exc:
                results.append(str(exc))
            else:
                results.append(None if said else "")
    return results
