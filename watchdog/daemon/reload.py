"""A reload of the plan: which launches are added, removed and restarted, what ends with those no longer
planned, and reloads taken one at a time in the order asked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio
import structlog

from watchdog.alerts.alert import HOST_LAUNCH_PREFIX
from watchdog.alerts.alerting import Alerting
from watchdog.daemon.launches import LaunchPlan
from watchdog.daemon.outages import Outages
from watchdog.exceptions import WatchdogError

__all__ = ["PlanChanges", "Reloads", "diff_plans", "resolve_unplanned"]

log = structlog.get_logger("watchdog.daemon")


@dataclass(frozen=True)
class PlanChanges:
    """The launch names a new plan adds, removes and restarts (changed ones), each sorted."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()


def diff_plans(running: Mapping[str, LaunchPlan], plans: Mapping[str, LaunchPlan]) -> PlanChanges:
    """What taking `plans` does to the launches `running`: unchanged ones are not touched."""
    return PlanChanges(
        added=tuple(sorted(name for name in plans if name not in running)),
        removed=tuple(sorted(name for name in running if name not in plans)),
        restarted=tuple(sorted(name for name in running if name in plans and plans[name] != running[name])),
    )


async def resolve_unplanned(alerting: Alerting, outages: Outages, plans: Mapping[str, LaunchPlan]) -> None:
    """End the problems of a launch no longer configured (removed by a reload or while the daemon was down, or
    renamed), and the outage of a host no launch is on any more: each resolved once."""
    hosts = {plan.host for plan in plans.values() if plan.host}
    for launch, kind in alerting.active():
        if launch.startswith(HOST_LAUNCH_PREFIX):
            host = launch.removeprefix(HOST_LAUNCH_PREFIX)
            if host in hosts:
                continue
            outages.pop(host, None)
        elif launch in plans:
            continue
        log.info("problem resolved: removed from the configuration", launch=launch, kind=kind.value)
        await alerting.resolve(launch, (kind,), "removed from the configuration")


class Reloads:
    """Reloads run one at a time, in the order asked: one asked while another runs waits for it, and all those
    asked meanwhile are answered by one reload after it (the config read then is the newest)."""

    def __init__(self, read: Callable[[], Awaitable[Mapping[str, LaunchPlan]]]) -> None:
        """`read()` gives the new plans (raising a `WatchdogError` for a config that is refused)."""
        self._read = read
        self._lock = anyio.Lock()
        self._asked = 0  # reloads asked so far
        self._done = 0  # the asks the last reload answered

    async def run(self, apply: Callable[[Mapping[str, LaunchPlan]], Awaitable[None]]) -> None:
        """Answer one ask: read the plans and `apply` them, unless a reload that began after this was asked
        has read the config already. A refused config is logged; the running one stays."""
        self._asked += 1
        asked = self._asked
        async with self._lock:
            if self._done >= asked:
                return  # a reload that began after this was asked has read the config
            self._done = self._asked
            try:
                plans = await self._read()
            except WatchdogError as exc:
                log.error("reload refused; the running configuration stays", error=str(exc))
                return
            await apply(plans)
