"""Alerts to the services teams read: one module per service, a registry of them (`build_message`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.message import Message, Options
from watchdog.exceptions import DeliveryError

__all__ = ["KINDS", "OPTIONS", "SECRET_OPTIONS", "Alert", "AlertKind", "build_message", "secret_values"]

Builder = Callable[[Alert, Options], Message | None]

# The notifier kinds of the config's `kind = ...`, each with the options it reads besides its URL:
# (required, optional), for the config's validation. Each kind is the module here that lays out its
# message (its `build`), imported when first used: validating a config loads none of them.
OPTIONS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = MappingProxyType(
    {
        "slack": (frozenset(), frozenset()),
        "discord": (frozenset(), frozenset()),
        "teams": (frozenset(), frozenset()),
        "mattermost": (frozenset(), frozenset({"channel", "username", "icon_url"})),
        "google_chat": (frozenset(), frozenset()),
        "telegram": (frozenset({"chat_id"}), frozenset({"message_thread_id"})),
        "ntfy": (frozenset(), frozenset({"token", "priority"})),
        "pagerduty": (frozenset({"routing_key"}), frozenset()),
        "webhook": (frozenset(), frozenset({"template", "content_type"})),
        "alertmanager": (frozenset(), frozenset({"runbook_url"})),
    }
)
KINDS = tuple(OPTIONS)
# Options that are secrets: accepted as env:NAME / file:/path, redacted, never shown in an error.
SECRET_OPTIONS = frozenset({"routing_key", "token"})


def build_message(kind: str, alert: Alert, options: Options | None = None) -> Message | None:
    """Lay out `alert` for the service `kind`.

    Returns:
        The message, or None when the service has nothing to say about this kind of alert (PagerDuty and
        Alertmanager take problems and their resolutions, not `ready` or `replaced`).

    Raises:
        DeliveryError: an unknown kind, a required option missing, or a template that cannot be filled.
    """
    if kind not in OPTIONS:
        raise DeliveryError(f"unknown notifier kind {kind!r}; known: {', '.join(KINDS)}")
    build: Builder = importlib.import_module(f"{__name__}.{kind}").build
    return build(alert, options or {})


def secret_values(options: Options) -> Iterable[str]:
    """The values of `options` that are secrets (scrubbed from every delivery error)."""
    return [str(options[name]) for name in SECRET_OPTIONS if options.get(name)]
