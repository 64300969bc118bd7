"""Verdicts and statuses from their JSON (`to_json`): tests write snapshots the way /status shows them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from watchdog.core.rootcause import Error
from watchdog.core.verdict import Entry, MissingLog, Progress, Status, Unreachable, Verdict
from watchdog.vocabulary import Category, State


def verdict_from_json(data: Mapping[str, Any]) -> Verdict:
    """The verdict `to_json` gave (a stored verdict, a test's snapshot); missing keys take their defaults.

    Raises:
        KeyError, ValueError, TypeError: not an object `to_json` makes.
    """
    err, entered = data.get("error"), list(data.get("entered") or ())
    error = context = None
    if err:
        error = Error(
            category=Category(err.get("category") or "other"),
            summary=err.get("summary") or "",
            exception=err.get("exception"),
            hint=err.get("hint") or "",
            ranks=tuple(err.get("ranks") or ()),
            line=int(err.get("line") or 0),
            traceback=tuple(err.get("traceback") or ()),
        )
        context = tuple(err.get("context") or ())
    missing = data.get("missing_log")
    since = missing.get("since") if missing else None
    return Verdict(
        engine=data.get("engine"),
        state=State(data["state"]),
        phase=State(data.get("phase") or data["state"]),
        error=error,
        context=context or (),
        timeline=tuple(
            Entry(
                State(item["state"]),
                item.get("line"),
                item.get("at"),
                item.get("reason") or "",
                float(entered[i]) if i < len(entered) else 0.0,
                item.get("duration_seconds"),
            )
            for i, item in enumerate(data.get("timeline") or ())
        ),
        progress=tuple(
            Progress(name, int(p.get("done") or 0), int(p.get("total") or 0))
            for name, p in (data.get("progress") or {}).items()
        ),
        facts=tuple((data.get("facts") or {}).items()),
        lines_read=int(data.get("lines_read") or 0),
        bytes_read=int(data.get("bytes_read") or 0),
        incarnation=int(data.get("incarnation") or 1),
        incarnations=int(data.get("incarnations") or 1),
        time_to_ready=data.get("time_to_ready_seconds"),
        missing_log=MissingLog(
            bool(missing.get("overdue")),
            missing.get("path") or "",
            datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp() if since else None,
            missing.get("seconds"),
        )
        if missing is not None
        else None,
        timed_out=bool(data.get("timed_out")),
        interrupted=bool(data.get("interrupted")),
    )


def status_from_json(data: Mapping[str, Any]) -> Status:
    """The status `to_json` gave (a test's snapshot): the verdict and the follower's and daemon's keys."""

    def when(value: object) -> float | None:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() if value else None

    gone = data.get("unreachable")
    return Status(
        verdict_from_json(data),
        name=data.get("name") or "",
        target=data.get("target") or "",
        elapsed=data.get("elapsed_seconds"),
        last_line=data.get("last_line") or "",
        host=data.get("host") or "",
        labels=tuple((str(k), str(v)) for k, v in (data.get("labels") or {}).items()),
        since=when(data.get("since")),
        incarnation_since=when(data.get("incarnation_since")),
        eta=data.get("eta_seconds"),
        note=data.get("note") or "",
        unreachable=Unreachable(when(gone["since"]) or 0.0, gone.get("error", ""), bool(gone.get("alerted")))
        if gone
        else None,
    )
