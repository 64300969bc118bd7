"""Where alerts are said: the `Notifier` protocol and its kinds (a service of `notifiers/` at its URLs, any
service apprise knows, the console), and the one-line form of an alert an operator reads."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import aiohttp
import anyio
import anyio.to_thread

from watchdog.alerts.alert import DEFAULT_ON
from watchdog.alerts.delivery import TransientDeliveryError, send
from watchdog.alerts.notifiers import Alert, AlertKind
from watchdog.exceptions import DeliveryError
from watchdog.vocabulary import DEFAULT_DELIVERY_TIMEOUT, DEFAULT_RATE_LIMIT, format_duration

__all__ = ["AppriseNotifier", "ConsoleAlerts", "Notifier", "ServiceNotifier", "alert_line"]

ALERTMANAGER_RESEND_SECONDS = 60.0  # a firing alert is sent to Alertmanager again this often
# apprise says only that a service did not take a notification: a refusal (a 4xx) and an outage (a refused
# connection, a 5xx) look the same. A few quick attempts get past a blip; then it is given up, counted and
# logged, rather than tried again forever. Seconds before the 2nd and 3rd attempt:
APPRISE_BACKOFF = (0.5, 2.0)


class Notifier(Protocol):
    """Somewhere alerts are said: a chat service, PagerDuty, an Alertmanager, the console."""

    @property
    def name(self) -> str:
        """The [notifiers.NAME] it is configured as."""

    @property
    def on(self) -> frozenset[AlertKind]:
        """The alert kinds it says."""

    @property
    def destinations(self) -> int:
        """How many URLs each get every alert."""

    @property
    def rate_limit(self) -> int:
        """Alerts per minute at most."""

    @property
    def remind_every(self) -> float | None:
        """Seconds between reminders of an unresolved problem (None: no reminders)."""

    @property
    def resend_every(self) -> float | None:
        """Seconds between re-sends of an unresolved problem, unchanged (Alertmanager)."""

    async def send(self, alert: Alert, destination: int, client: aiohttp.ClientSession) -> bool:
        """Say `alert` at URL number `destination`; False when this kind of alert is not for it.

        Raises:
            TransientDeliveryError: worth trying again later.
            DeliveryError: refused for good (never naming a secret).
        """


@dataclass(frozen=True, kw_only=True)
class _URLNotifier:
    """What the notifiers that send to URLs share: the URLs (secrets), the kinds said, the pace."""

    name: str
    urls: tuple[str, ...] = field(repr=False)
    on: frozenset[AlertKind] = frozenset(DEFAULT_ON)
    rate_limit: int = DEFAULT_RATE_LIMIT
    remind_every: float | None = None
    timeout: float = DEFAULT_DELIVERY_TIMEOUT

    @property
    def destinations(self) -> int:
        """One per URL."""
        return len(self.urls)

    @property
    def resend_every(self) -> float | None:
        """Chat services need an alert once."""
        return None


@dataclass(frozen=True, kw_only=True)
class ServiceNotifier(_URLNotifier):
    """A service of `watchdog.alerts.notifiers` (slack, pagerduty, alertmanager, ...) at one or more URLs."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def resend_every(self) -> float | None:
        """Alertmanager forgets a firing alert that is not sent again; the others need it once."""
        return ALERTMANAGER_RESEND_SECONDS if self.kind == "alertmanager" else None

    async def send(self, alert: Alert, destination: int, client: aiohttp.ClientSession) -> bool:
        """POST the service's message for `alert` to URL number `destination`."""
        if destination >= len(self.urls):
            raise DeliveryError(f"notifier {self.name} has no URL number {destination + 1} any more")
        return await send(
            self.kind,
            self.urls[destination],
            alert,
            client=client,
            options=self.options,
            timeout=self.timeout,
        )


@dataclass(frozen=True, kw_only=True)
class AppriseNotifier(_URLNotifier):
    """Any service apprise knows, by apprise URL (the optional extra `apprise`), called off the event loop:
    apprise's plugins block."""

    async def send(self, alert: Alert, destination: int, client: aiohttp.ClientSession) -> bool:
        """Notify through apprise (in a worker thread, abandoned after `timeout`), as plain text whose log
        text is inert (apprise's Discord plugin would turn `@everyone` in the body into a ping).

        Raises:
            DeliveryError: the service did not take it in `1 + len(APPRISE_BACKOFF)` attempts (apprise
                cannot tell a refusal from an outage: given up rather than tried forever).
            TransientDeliveryError: apprise ran out of time.
        """
        from watchdog.alerts.compose import inert, plain_text  # noqa: PLC0415

        url = self.urls[destination]
        title, body = inert(alert.title), plain_text(alert)
        for pause in (*APPRISE_BACKOFF, None):
            try:
                with anyio.fail_after(self.timeout * 3):
                    outcome = await anyio.to_thread.run_sync(
                        _apprise_notify, url, title, body, abandon_on_cancel=True
                    )
            except TimeoutError:
                raise TransientDeliveryError(
                    f"apprise notifier {self.name}: no answer within {self.timeout * 3:g}s"
                ) from None
            if outcome == "sent":
                return True
            if outcome == "timeout":
                raise TransientDeliveryError(
                    f"apprise notifier {self.name}: the service did not answer in time"
                )
            if pause is not None:
                await anyio.sleep(pause)
        raise DeliveryError(
            f"apprise notifier {self.name}: the service did not take the alert "
            f"({1 + len(APPRISE_BACKOFF)} attempts); apprise does not say why"
        )


def _apprise_notify(url: str, title: str, body: str) -> str:
    """`sent`, `failed` or `timeout` (a newer apprise's `AppriseResult` tells a timeout apart; an older one
    returns a bool)."""
    # apprise loads its plugins (and their deprecated imports) lazily: their warnings are not our users'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import apprise  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
        except ImportError:
            raise DeliveryError(
                "the apprise notifier needs apprise: pip install 'llm-launch-watchdog[apprise]'"
            ) from None
        sender = apprise.Apprise()
        if not sender.add(url):
            raise DeliveryError(
                "apprise does not know this URL's scheme (the URL is not shown: it is a secret)"
            )
        # plain text: apprise escapes it for the services that read Markdown or HTML
        result = sender.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT)
        if result:
            return "sent"
        status = getattr(getattr(result, "status", None), "name", "")
        return "timeout" if status == "TIMEOUT" else "failed"


@dataclass(frozen=True)
class ConsoleAlerts:
    """Alerts as one line each on a text stream (standard output by default)."""

    name: str = "console"
    out: TextIO = field(default_factory=lambda: sys.stdout, compare=False)
    on: frozenset[AlertKind] = frozenset(AlertKind)
    rate_limit: int = 10_000
    remind_every: float | None = None

    @property
    def destinations(self) -> int:
        """The stream."""
        return 1

    @property
    def resend_every(self) -> float | None:
        """Said once."""
        return None

    async def send(self, alert: Alert, destination: int, client: aiohttp.ClientSession) -> bool:
        """Print the alert's line."""
        self.out.write(alert_line(alert) + "\n")
        self.out.flush()
        return True


def alert_line(alert: Alert) -> str:
    """One line an operator reads: who, what, why and what to do."""
    where = f"{alert.where}"
    if alert.kind is AlertKind.CRASHED:
        ranks = alert.ranks
        if ranks and all(_RANK.match(r) for r in ranks):
            on = f" on ranks {', '.join(ranks)}"
        else:
            on = f" in {', '.join(ranks)}" if ranks else ""
        line = f"{where}: crashed during {alert.phase}{on}: {alert.summary}"
        return line + (f"; hint: {alert.hint}" if alert.hint else "")
    if alert.kind is AlertKind.STALLED and alert.phase == "pending":  # its log never came
        return f"{where}: no log: {alert.summary}"
    if alert.serving_hang and alert.kind is AlertKind.STALLED:
        # a ready server's hang: the startup's progress bars say nothing of it
        return f"{where}: hangs while serving: {alert.summary or 'requests waiting, no token generated'}"
    if alert.kind is AlertKind.STALLED:
        progress = ", ".join(
            f"{name} {done}/{total}" if total is not None else f"{name} {done}"
            for name, done, total in alert.progress
            if done is not None
        )
        at = f" at {progress}" if progress else ""
        return f"{where}: stalled in {alert.phase}{at}: {alert.summary or 'no progress'}"
    if alert.kind is AlertKind.READY:
        took = (
            f" after {format_duration(alert.time_since_start)}" if alert.time_since_start is not None else ""
        )
        usual = (
            f" (usually {format_duration(alert.usual_seconds)})" if alert.usual_seconds is not None else ""
        )
        return f"{where}: ready{took}{usual}"
    # an outage, a replaced launch, a resolution: the title, and the detail
    return alert.title + (f": {alert.detail}" if alert.detail else "")


_RANK = re.compile(r"^(?:(?:[A-Z]{2,4}\d+ ?)+|rank\d+)$")
