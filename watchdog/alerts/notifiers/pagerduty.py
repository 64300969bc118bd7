"""PagerDuty: an Events API v2 event, `trigger` for a problem and `resolve` for its end."""

from __future__ import annotations

from typing import Any

from watchdog.alerts.alert import PROBLEMS, SEVERITIES, Alert, AlertKind, rfc3339
from watchdog.alerts.compose import cut, lead, traceback_tail
from watchdog.alerts.message import Message, Options
from watchdog.exceptions import DeliveryError

__all__ = ["MAX_SUMMARY", "PATH", "build"]

PATH = "/v2/enqueue"
MAX_SUMMARY = 1024


def build(alert: Alert, options: Options) -> Message | None:
    """The event, or None for `ready` and `replaced` (news, not incidents).

    The dedup_key is the alert's incident key (launch, incarnation, problem kind), so a resolution ends
    the incident its problem opened, and a re-sent trigger joins it. Options: `routing_key` (required:
    the integration key of the service, a secret).
    """
    key = options.get("routing_key")
    if not key:
        raise DeliveryError("pagerduty needs the option routing_key (the integration key of the service)")
    if alert.kind is AlertKind.RESOLVED:
        if alert.problem not in PROBLEMS:
            return None
        return Message(
            json={"routing_key": key, "event_action": "resolve", "dedup_key": alert.incident_key}, path=PATH
        )
    if alert.kind not in PROBLEMS:
        return None
    details: dict[str, Any] = {
        "launch": alert.launch,
        "host": alert.host or "local",
        "engine": alert.engine,
        "phase": alert.phase,
        "incarnation": alert.incarnation,
        "what": cut(lead(alert), 2000),
    }
    if alert.hint:
        details["hint"] = cut(alert.hint, 2000)
    if alert.ranks:
        details["ranks"] = ", ".join(alert.ranks)
    if alert.time_in_phase is not None:
        details["time_in_phase_seconds"] = round(alert.time_in_phase, 1)
    if alert.time_since_start is not None:
        details["time_since_start_seconds"] = round(alert.time_since_start, 1)
    if alert.kind is AlertKind.STALLED and alert.last_line:
        details["last_line"] = cut(alert.last_line, 1000)
    if alert.traceback:
        details["traceback_end"] = traceback_tail(alert.traceback, 8000)
    if alert.facts:
        details["facts"] = {
            name: cut(value, 300) if isinstance(value, str) else value for name, value in alert.facts[:50]
        }
    if alert.progress:
        details["progress"] = {name: {"done": done, "total": total} for name, done, total in alert.progress}
    if alert.labels:
        details["labels"] = {name: cut(value, 300) for name, value in alert.labels[:20]}
    summary = f"{alert.title}: {lead(alert)}"
    payload: dict[str, Any] = {
        "summary": cut(summary, MAX_SUMMARY),
        "source": alert.host or "localhost",
        "severity": alert.severity if alert.severity in SEVERITIES else "error",
        "component": alert.launch,
        "group": alert.engine or "unknown",
        "class": alert.category or alert.kind.value,
        "timestamp": rfc3339(alert.started_at),
        "custom_details": details,
    }
    body: dict[str, Any] = {
        "routing_key": key,
        "event_action": "trigger",
        "dedup_key": alert.incident_key,
        "payload": payload,
        "client": "watchdog",
    }
    if alert.link:
        body["client_url"] = alert.link
        body["links"] = [{"href": alert.link, "text": "Status page"}]
    return Message(json=body, path=PATH)
