"""Alertmanager: an API v2 alert (POST /api/v2/alerts), firing for a problem, ended by its resolution."""

from __future__ import annotations

import re
from typing import Any

from watchdog.alerts.alert import Alert, AlertKind, rfc3339
from watchdog.alerts.compose import cut, fields, lead, traceback_tail
from watchdog.alerts.message import Message, Options
from watchdog.vocabulary import RUNBOOK_URL, runbook_url

__all__ = ["ALERTNAMES", "PATH", "build"]

PATH = "/api/v2/alerts"
# One alertname per problem: a resolution carries its problem's name, so it ends that very alert.
ALERTNAMES = {
    AlertKind.CRASHED: "WatchdogLaunchCrashed",
    AlertKind.STALLED: "WatchdogLaunchStalled",
    AlertKind.UNREACHABLE: "WatchdogHostUnreachable",
}
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RESERVED = frozenset({"alertname", "launch", "host", "engine", "severity", "category", "occurrence"})
_DESCRIPTION_CHARS = 8000


def build(alert: Alert, options: Options) -> Message | None:
    """A one-alert list, or None for `ready` and `replaced` (news, not alerts).

    Labels are what makes the alert one alert across re-sends and across daemons: alertname, launch,
    host, engine, severity, category, `occurrence` for a second or later stall of one incarnation, plus the
    launch's extra labels (never the incarnation, whose change would open a second alert for the same
    launch). An empty label is left out, as Alertmanager would.
    The daemon re-sends a firing alert every minute (Alertmanager resolves one not re-sent within its
    resolve_timeout); `endsAt` is set only by the resolution.
    """
    alertname = ALERTNAMES.get(alert.problem)
    if alertname is None:
        return None
    labels: dict[str, str] = {
        name: _label(value)
        for name, value in alert.labels
        if _LABEL_NAME.fullmatch(name) and name not in _RESERVED
    }
    labels.update(
        alertname=alertname,
        launch=alert.launch,
        host=alert.host,
        engine=alert.engine,
        severity=alert.severity,
        category=alert.category or "",
    )
    if alert.occurrence > 1:
        # a launch's second stall in one incarnation is another alert than its first: a late resolution of
        # the first must not end it
        labels["occurrence"] = str(alert.occurrence)
    labels = {name: _label(value) for name, value in labels.items() if value}
    description = [lead(alert)]
    description.extend(f"{name}: {value}" for name, value in fields(alert))
    if alert.kind is AlertKind.STALLED and alert.last_line:
        description.append(f"last line: {alert.last_line}")
    text = cut("\n".join(description), _DESCRIPTION_CHARS // 2)
    if alert.traceback and alert.problem is AlertKind.CRASHED:
        text += "\n" + traceback_tail(alert.traceback, _DESCRIPTION_CHARS - len(text) - 1)
    annotations = {
        "summary": cut(f"{alert.title}: {lead(alert)}", 1000),
        "description": text,
        # the alert's section of docs/runbooks.md (the Prometheus rules' alerts of the same name point there too)
        "runbook_url": runbook_url(alertname, str(options.get("runbook_url") or RUNBOOK_URL)),
    }
    if alert.hint:
        annotations["hint"] = cut(alert.hint, 2000)
    item: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(alert.started_at),
    }
    if alert.kind is AlertKind.RESOLVED:
        item["endsAt"] = rfc3339(alert.ended_at or alert.started_at)
    if alert.link:
        item["generatorURL"] = alert.link
    return Message(json=[item], path=PATH)


def _label(value: str) -> str:
    return cut(" ".join(value.split()), 200)
