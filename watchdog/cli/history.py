"""`watchdog history`: past launches from the state file: a column each, phase durations, changed arguments and
facts as rows."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.cli.render import write_out
from watchdog.exceptions import ConfigError, UsageError
from watchdog.vocabulary import (
    DEFAULT_STATE_DIR,
    EXIT_CONFIG,
    EXIT_USAGE,
    OUTCOMES,
    STARTUP_TIME_STATES,
    format_duration,
)

if TYPE_CHECKING:
    from watchdog.core.compare import Changes
    from watchdog.store import IncarnationRecord

DEFAULT_LIMIT = 20  # incarnations shown unless --limit says otherwise
MAX_CELL = 36  # characters of a cell before it is cut with "…"
_GAP = "  "
_PHASES = tuple(s.value for s in STARTUP_TIME_STATES)
_ONGOING = "…"  # the phase was not over when last recorded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `watchdog history`, for the command line's subparser."""
    parser.add_argument("launch", nargs="?", metavar="LAUNCH", help="only this launch (default: all)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config", type=Path, metavar="FILE", help="the daemon's config (its state_dir)")
    where.add_argument(
        "--state-dir",
        metavar="DIR",
        help=f"the daemon's state_dir (default {DEFAULT_STATE_DIR}, as in the config)",
    )
    parser.add_argument(
        "--limit",
        type=_positive,
        default=DEFAULT_LIMIT,
        metavar="N",
        help="incarnations to show, newest first",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of incarnations")
    parser.set_defaults(handler=run_history)


def run_history(args: argparse.Namespace) -> int:
    """Run `watchdog history` with parsed arguments; 0, or 64 / 78 for a missing or unreadable state file."""
    import anyio  # noqa: PLC0415 - only when the command runs

    state_dir = args.state_dir or DEFAULT_STATE_DIR
    try:
        if args.config is not None:  # the config's state_dir; its errors are the config's (exit 78)
            from watchdog.config.loading import load_config  # noqa: PLC0415

            state_dir = str(load_config(args.config).daemon.state_dir)
        records = anyio.run(_read, state_dir, args.launch, args.limit)
    except UsageError as exc:
        print(f"watchdog: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"watchdog: state error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.json:
        write_out(json.dumps([r.to_json() for r in records], indent=2))
    elif not records:
        which = f"launch {args.launch!r}" if args.launch else "any launch"
        write_out(f"no history of {which} in {state_dir}")
    else:
        write_out(format_history(records, width=shutil.get_terminal_size((120, 24)).columns))
    return 0


async def _read(state_dir: str, launch: str | None, limit: int) -> list[IncarnationRecord]:
    from watchdog.store import open_store  # noqa: PLC0415

    async with open_store(state_dir, readonly=True) as store:
        return await store.history(launch, limit)


def format_history(records: Sequence[IncarnationRecord], *, width: int = 120) -> str:
    """The incarnations as a table: a column each (in the given order), a row per phase duration and fact."""
    rows = _rows(records)
    label_width = max(len(label) for label, _ in rows)
    widths = [
        min(MAX_CELL, max(len(cells[i]) for _, cells in rows if cells is not None))
        for i in range(len(records))
    ]
    blocks: list[list[int]] = [[]]
    used = label_width
    for i, w in enumerate(widths):
        if blocks[-1] and used + len(_GAP) + w > width:
            blocks.append([])
            used = label_width
        blocks[-1].append(i)
        used += len(_GAP) + w
    out: list[str] = []
    for block in blocks:
        if out:
            out.append("")
        for label, cells in rows:
            if cells is None:
                out.append(label)
                continue
            if not any(cells[i] for i in block):
                continue
            text = label.ljust(label_width) + "".join(_GAP + _cut(cells[i]).ljust(widths[i]) for i in block)
            out.append(text.rstrip())
    return "\n".join(out)


def _rows(records: Sequence[IncarnationRecord]) -> list[tuple[str, list[str] | None]]:
    """(label, a cell per record); a None row is a section heading."""
    rows: list[tuple[str, list[str] | None]] = [
        ("", [f"{r.launch} #{r.incarnation}" for r in records]),
        ("started (UTC)", [_time(r.started_at) for r in records]),
        ("host", [r.host for r in records]),
        ("engine", [r.engine or "" for r in records]),
        ("outcome", [_outcome(r) for r in records]),
        ("error", [_error(r) for r in records]),
        ("phases:", None),
    ]
    states = [p for p in _PHASES if any(p in r.phase_durations or r.ongoing == p for r in records)]
    rows.extend((f"  {state}", [_phase(r, state) for r in records]) for state in states)
    rows.append(("  to ready", [_seconds(r.time_to_ready) for r in records]))
    changes = [r.changes for r in records]
    flags = dict.fromkeys(a.flag for c in changes if c is not None for a in c.arguments)
    if flags:  # what each relaunch changed since the launch before, an argument a row
        rows.append(("changed since the launch before:", None))
        rows.extend((f"  {flag}", [_changed(c, flag) for c in changes]) for flag in flags)
    keys = dict.fromkeys(key for r in records for key in r.facts)  # in the order they first appear
    if keys:
        rows.append(("facts:", None))
        rows.extend((f"  {key}", [_fact(key, r.facts.get(key)) for r in records]) for key in keys)
    return rows


def _changed(changes: Changes | None, flag: str) -> str:
    # an argument's change in one relaunch: "0.78 -> 0.92", "flashinfer added", "" where it did not change
    found = next((a for a in changes.arguments if a.flag == flag), None) if changes else None
    return "" if found is None else found.text().removeprefix(flag).strip()


def _outcome(r: IncarnationRecord) -> str:
    state = (r.verdict or {}).get("state") or r.state
    phase = (r.verdict or {}).get("phase") or r.phase
    if state == "ready":
        return f"ready after {_seconds(r.time_to_ready)}" if r.time_to_ready is not None else "ready"
    if state in {s.value for s in OUTCOMES}:
        return f"{state} in {phase}"
    return f"{state}, no verdict"


def _error(r: IncarnationRecord) -> str:
    err = (r.verdict or {}).get("error")
    if not isinstance(err, Mapping):
        return ""
    return f"{err.get('category', 'other')}: {err.get('summary', '')}"


def _phase(r: IncarnationRecord, state: str) -> str:
    return _seconds(r.phase_durations.get(state)) + (_ONGOING if r.ongoing == state else "")


def _seconds(value: float | None) -> str:
    return format_duration(value) if value is not None else ""


def _fact(key: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return " ".join(f"{k}:{_fact(key, v)}" for k, v in value.items())
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if key.endswith("_gb"):
        return f"{value:g} GB"
    if key.endswith("_bytes"):
        return f"{value / 2**30:.1f} GiB"
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _time(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%d %H:%M")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return value
