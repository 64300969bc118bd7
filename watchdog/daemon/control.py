"""Launch mode in the daemon: start and stop a launch's command on its host, and end it on a crash verdict.

What `POST /launches/NAME/start|stop` (and `watchdog start|stop NAME`) ask: each answer is a `ControlAnswer`, an
HTTP status and a JSON body, so that the HTTP server only renders it. One start or stop of a launch at a time
(`Running.control_lock`). A stop tells the follower first (`LaunchFollower.expect_stop`), so that the end it
asked for is `stopped`, never a crash; a start tells it after (`process_started`), so that the new run's end is
watched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from watchdog.exceptions import StartFailed, TargetError, reason_of
from watchdog.follow.follower import LaunchFollower
from watchdog.follow.launching import (
    ContainerCommand,
    ContainerEnded,
    Killed,
    container_status,
    end_container,
    kill_group,
    log_size,
    read_pid,
    start,
    start_container,
)

if TYPE_CHECKING:
    from watchdog.daemon.launches import LaunchControl, Running
    from watchdog.follow.sources.commands import Runner

__all__ = ["STOP_REASON", "ControlAnswer", "kill_on_crash", "start_run", "stop_run"]

log = structlog.get_logger("watchdog.daemon")

STOP_REASON = "stopped by watchdog stop"
_REPLACED = "replaced by watchdog start --replace"


@dataclass(frozen=True)
class ControlAnswer:
    """What a start or stop did: the HTTP status (200 done; 404 no such launch; 409 refused as things stand;
    422 the command could not start; 502 its host cannot be reached) and the JSON body."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def refused(cls, status: int, launch: str, error: str) -> ControlAnswer:
        """An answer that did nothing: `{"launch": ..., "error": ...}`."""
        return cls(status, {"launch": launch, "error": error})


def _follower(run: Running) -> LaunchFollower | None:
    # a launch with a command has one source (the config refuses one with nodes): its follower is a launch's
    follower = run.follower
    return follower if isinstance(follower, LaunchFollower) else None


async def _end(run: Running, runner: Runner, control: LaunchControl, pid: int, reason: str) -> Killed:
    # the follower hears first that this end is asked for, then that it came (its verdict: stopped)
    follower = _follower(run)
    if follower is not None:
        follower.expect_stop(reason)
    killed = await kill_group(runner, pid, grace=control.stop_grace)
    if follower is not None:
        with contextlib.suppress(Exception):  # a follower that ended meanwhile has nothing to say it to
            await follower.stopped(reason)
    return killed


async def start_run(run: Running, runner: Runner, *, replace: bool = False) -> ControlAnswer:
    """Start the launch's command, unless its last run still runs (then end that first with `replace`)."""
    name, control = run.plan.spec.name, run.plan.control
    if control is None:
        return ControlAnswer.refused(409, name, f"launch {name!r} has no command (config: command = [...])")
    command = control.command
    if isinstance(command, ContainerCommand):
        return await _start_container(run, runner, control, command, replace=replace)
    async with run.control_lock:
        try:
            body: dict[str, Any] = {"launch": name}
            previous = await read_pid(runner, command.pid_file)
            if previous is not None:
                if not replace:
                    return ControlAnswer.refused(
                        409,
                        name,
                        f"launch {name!r} is running (pid {previous}): stop it first, or replace it",
                    )
                killed = await _end(run, runner, control, previous, _REPLACED)
                body["replaced"] = killed.to_json()
            # the follower is told where the new run begins before it begins: it may read its first lines
            # before the start's answer is back
            size = await log_size(runner, command.log)
            follower = _follower(run)
            if follower is not None:
                follower.expect_run_at(size)
            started = await start(runner, command)
        except (StartFailed, TargetError) as exc:
            follower = _follower(run)
            if follower is not None:
                follower.expect_run_at(None)  # nothing began
            status = 422 if isinstance(exc, StartFailed) else 502
            return ControlAnswer.refused(status, name, str(exc) if status == 422 else reason_of(exc))
        run.started_pid = started.pid
        follower = _follower(run)
        if follower is not None:
            if started.offset != size:  # something else wrote to the log meanwhile
                follower.expect_run_at(started.offset)
            follower.process_started()
        body["started"] = started.to_json(command.pid_file)
        log.info("launch started", launch=name, pid=started.pid, replaced=body.get("replaced"))
        return ControlAnswer(200, body)


async def stop_run(run: Running, runner: Runner) -> ControlAnswer:
    """Stop the launch's running command: SIGTERM to its process group, SIGKILL after its `stop_grace`."""
    name, control = run.plan.spec.name, run.plan.control
    if control is None:
        return ControlAnswer.refused(409, name, f"launch {name!r} has no command (config: command = [...])")
    if isinstance(control.command, ContainerCommand):
        return await _stop_container(run, runner, control, control.command)
    async with run.control_lock:
        try:
            pid = await read_pid(runner, control.command.pid_file)
            if pid is not None:
                killed = await _end(run, runner, control, pid, STOP_REASON)
            elif run.started_pid is not None:  # its first process is gone: what is left of its group
                killed = await kill_group(runner, run.started_pid, grace=control.stop_grace)
            if pid is None and (run.started_pid is None or killed.signal is None):
                return ControlAnswer.refused(409, name, f"launch {name!r} is not running")
        except TargetError as exc:
            return ControlAnswer.refused(502, name, reason_of(exc))
    log.info("launch stopped", launch=name, pgid=killed.pgid, signal=killed.signal, pids=len(killed.pids))
    return ControlAnswer(200, {"launch": name, "stopped": killed.to_json()})


async def kill_on_crash(run: Running, runner: Runner) -> Killed | ContainerEnded | None:
    """A crash verdict of the run this daemon started: end its process group (its GPUs freed at once), and say
    what was killed in the launch's note. None: not a run started here (or another run was started since)."""
    control = run.plan.control
    if control is None or not control.kill_on_crash:
        return None
    if isinstance(control.command, ContainerCommand):
        return await _kill_container(run, runner, control.command)
    if run.started_pid is None:
        return None
    name = run.plan.spec.name
    async with run.control_lock:
        try:
            pid = await read_pid(runner, control.command.pid_file)
            if pid is not None and pid != run.started_pid:
                return None  # the pid file names a run started since, elsewhere
            # by its session: its workers are ended even when its first process is gone
            killed = await kill_group(runner, run.started_pid, grace=control.stop_grace)
        except TargetError as exc:
            log.warning("kill on crash failed", launch=name, error=reason_of(exc))
            run.note = f"kill on crash failed: {reason_of(exc)}"
            return None
    run.note = f"killed on crash: {killed}"
    log.info("killed on crash", launch=name, pgid=killed.pgid, signal=killed.signal, pids=list(killed.pids))
    return killed


# -- containers ------------------------------------------------------------------------------------------------

_RUNNING = frozenset({"running", "restarting", "paused"})


async def _end_container(
    run: Running, runner: Runner, control: LaunchControl, command: ContainerCommand, reason: str
) -> ContainerEnded:
    follower = _follower(run)
    if follower is not None:
        follower.expect_stop(reason)
    ended = await end_container(runner, command.runtime, command.name, grace=control.stop_grace)
    if follower is not None:
        with contextlib.suppress(Exception):  # a follower that ended meanwhile has nothing to say it to
            await follower.stopped(reason)
    return ended


async def _start_container(
    run: Running, runner: Runner, control: LaunchControl, command: ContainerCommand, *, replace: bool
) -> ControlAnswer:
    name = run.plan.spec.name
    async with run.control_lock:
        try:
            body: dict[str, Any] = {"launch": name}
            state = await container_status(runner, command.runtime, command.name)
            if state is not None and state[0] in _RUNNING:
                if not replace:
                    return ControlAnswer.refused(
                        409,
                        name,
                        f"launch {name!r} is running (container {command.name}): stop it first, or replace it",
                    )
                body["replaced"] = (await _end_container(run, runner, control, command, _REPLACED)).to_json()
            container = await start_container(runner, command)
        except StartFailed as exc:
            return ControlAnswer.refused(422, name, str(exc))
        except TargetError as exc:
            return ControlAnswer.refused(502, name, reason_of(exc))
        run.started_container = container
        follower = _follower(run)
        if follower is not None:
            follower.process_started()
        body["started"] = {"container": command.name, "id": container}
        log.info("launch started", launch=name, container=container, replaced=body.get("replaced"))
        return ControlAnswer(200, body)


async def _stop_container(
    run: Running, runner: Runner, control: LaunchControl, command: ContainerCommand
) -> ControlAnswer:
    name = run.plan.spec.name
    async with run.control_lock:
        try:
            state = await container_status(runner, command.runtime, command.name)
            if state is None or state[0] not in _RUNNING:
                return ControlAnswer.refused(409, name, f"launch {name!r} is not running")
            ended = await _end_container(run, runner, control, command, STOP_REASON)
        except TargetError as exc:
            return ControlAnswer.refused(502, name, reason_of(exc))
    log.info("launch stopped", launch=name, container=command.name, exit_code=ended.exit_code)
    return ControlAnswer(200, {"launch": name, "stopped": ended.to_json()})


async def _kill_container(run: Running, runner: Runner, command: ContainerCommand) -> ContainerEnded | None:
    # only the container this daemon started (its id), still running: `RUNTIME kill NAME`
    name = run.plan.spec.name
    if run.started_container is None:
        return None
    async with run.control_lock:
        try:
            state = await container_status(runner, command.runtime, command.name)
            if state is None or state[0] not in _RUNNING:
                return None
            ended = await end_container(runner, command.runtime, command.name, grace=None)
        except TargetError as exc:
            log.warning("kill on crash failed", launch=name, error=reason_of(exc))
            run.note = f"kill on crash failed: {reason_of(exc)}"
            return None
    run.note = f"killed on crash: {ended}"
    log.info("killed on crash", launch=name, container=command.name, exit_code=ended.exit_code)
    return ended
