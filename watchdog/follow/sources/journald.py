"""Follow a systemd unit's (or a syslog identifier's) journal entries, here or on an SSH host, resuming by cursor.

The entries are read with `journalctl -o json` (the backlog to its end, then `--follow` from the last cursor
seen), each entry's MESSAGE becoming one newline-terminated line of the stream; every chunk carries the
journal cursor of its last entry, so that `open_follow(offset, cursor)` (`--after-cursor`) goes on exactly after
it. Where systemd runs, the unit's state (`systemctl show`) is the process evidence: a main process that exited
or was killed gives `Ended`, and a new invocation of the unit is a new stream (`FileRestarted("restarted")`).
Every command is one shell line whose arguments are quoted with `shlex.quote`; it runs under `sh -c` here and
in a session channel of the shared SSH pool on a host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import structlog

from watchdog.backoff import FULL_JITTER, backoff
from watchdog.exceptions import ChannelRefused, ConnectionLost, UsageError
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileRestarted,
    SourceItem,
)
from watchdog.follow.sources.commands import LocalRunner, Output, Runner, SSHRunner, run

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.follow.sources.target import Target

__all__ = [
    "IDENTIFIER_PREFIX",
    "UNIT_PROPERTIES",
    "Entry",
    "JournalMatch",
    "JournaldSource",
    "UnitState",
    "entry_line",
    "parse_entry",
    "parse_match",
    "parse_unit_state",
    "read_command",
    "source",
    "state_command",
    "stream_id",
]

log = structlog.get_logger("watchdog.journald")

IDENTIFIER_PREFIX = "identifier="
# The unit's state asked of systemd; MemoryMax names the limit of a unit the kernel's OOM killer ended
UNIT_PROPERTIES = (
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainStatus",
    "ExecMainCode",
    "InvocationID",
    "NRestarts",
    "MemoryMax",
)
# What the state command prints where systemd is not the init system (no /run/systemd/system)
NO_SYSTEMD = "NoSystemd=yes"
# The fields journalctl is asked for (it adds __CURSOR and the timestamps): the rest of an entry is not read
OUTPUT_FIELDS = ("MESSAGE", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_SYSTEMD_INVOCATION_ID", "_BOOT_ID")
# journald's unit types: a unit name without one of these suffixes is a service, as for `journalctl -u`
_UNIT_TYPES = frozenset(
    {"service", "socket", "target", "device", "mount", "automount", "swap", "timer", "path", "slice", "scope"}
)
# si_code of the main process's end as `systemctl show` prints ExecMainCode (CLD_EXITED, CLD_KILLED, CLD_DUMPED)
_EXITED, _KILLED, _DUMPED = 1, 2, 3
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE"}
_SIGNALS |= {9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

DEFAULT_STATE_INTERVAL = 1.0
# An ended unit's Ended waits until its journal has been quiet this long (journald may still be writing the last
# lines the process wrote before it died when systemd already says it is gone)
ENDED_SETTLE = 0.25
RETRY_INITIAL = 0.1
RETRY_MAX = 5.0
CONNECT_ATTEMPTS = 3  # attempts at the first connection before ConnectionLost ends the iteration
_INSUFFICIENT = "insufficient permissions"


@dataclass(frozen=True)
class JournalMatch:
    """Which entries are followed: a unit's (`_SYSTEMD_UNIT`) or a syslog identifier's (`SYSLOG_IDENTIFIER`)."""

    field: str
    value: str

    @property
    def unit(self) -> str | None:
        """The unit name, for a unit match (its state can be asked of systemd)."""
        return self.value if self.field == "_SYSTEMD_UNIT" else None

    def __str__(self) -> str:
        return self.value if self.unit else f"{IDENTIFIER_PREFIX}{self.value}"


def parse_match(name: str) -> JournalMatch:
    """The match for a journald target's name: `identifier=NAME` or a unit (`NAME` without a unit type suffix
    is `NAME.service`, as `journalctl -u` has it).

    Raises:
        UsageError: the name is empty.
    """
    if name.startswith(IDENTIFIER_PREFIX):
        identifier = name[len(IDENTIFIER_PREFIX) :]
        if not identifier:
            raise UsageError(f"journald target {name!r} names no identifier")
        return JournalMatch("SYSLOG_IDENTIFIER", identifier)
    if not name or "/" in name:
        raise UsageError(f"journald target {name!r} is not a unit name (or identifier=NAME)")
    suffix = name.rpartition(".")[2]
    return JournalMatch("_SYSTEMD_UNIT", name if "." in name and suffix in _UNIT_TYPES else f"{name}.service")


@dataclass(frozen=True)
class Entry:
    """One journal entry, as far as the stream needs it."""

    cursor: str
    message: bytes | None  # None: the entry has no MESSAGE (it adds nothing to the log)
    fields: Mapping[str, str]  # the match fields and the stream's ids that the entry has, as text

    @property
    def invocation(self) -> str | None:
        """The unit invocation that wrote the entry (set by journald for a unit's processes)."""
        return self.fields.get("_SYSTEMD_INVOCATION_ID")

    def matches(self, match: JournalMatch) -> bool:
        """Whether the entry belongs to what is followed (journalctl's match does this; this keeps a stray one
        out, such as systemd's own lines about the unit)."""
        return self.fields.get(match.field) == match.value


def _field_bytes(value: object) -> bytes | None:
    """A field of `journalctl -o json`: a string, an array of byte values (not UTF-8), null (too large without
    `--all`) or an array of those (a field that occurs more than once: its values joined by newlines)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, list):
        if all(isinstance(item, int) for item in value):
            return bytes(item & 0xFF for item in value)
        parts = [_field_bytes(item) for item in value]
        return b"\n".join(part for part in parts if part is not None)
    return None


def parse_entry(line: bytes) -> Entry | None:
    """The entry on one line of `journalctl -o json`; None for anything else (a blank line, a notice)."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("__CURSOR"), str):
        return None
    fields = {}
    for name in OUTPUT_FIELDS[1:]:
        value = _field_bytes(raw.get(name))
        if value is not None:
            fields[name] = value.decode("utf-8", "replace")
    return Entry(cursor=raw["__CURSOR"], message=_field_bytes(raw.get("MESSAGE")), fields=fields)


def entry_line(entry: Entry) -> bytes:
    """The entry's message as one line of the stream, newline-terminated.

    journald keeps each line a process writes to its stdout as an entry of its own (without the newline);
    a message sent whole with newlines in it (the native protocol) keeps them, so its lines stay lines.
    """
    message = entry.message or b""
    return (message[:-1] if message.endswith(b"\n") else message) + b"\n"


def stream_key(entry: Entry, match: JournalMatch) -> str:
    """What names the entry's stream: its unit invocation, else the match within the entry's boot."""
    if entry.invocation:
        return f"invocation:{entry.invocation}"
    return f"boot:{entry.fields.get('_BOOT_ID', '')}:{match}"


def stream_id(key: str) -> tuple[int, int]:
    """The stream's id as a checkpoint keeps it: (0, the first 15 hex digits of its key's sha256)."""
    return (0, int(hashlib.sha256(key.encode()).hexdigest()[:15], 16))


@dataclass(frozen=True)
class UnitState:
    """What `systemctl show` says of a unit (see `UNIT_PROPERTIES`)."""

    load: str
    active: str
    sub: str
    result: str
    main_code: int  # 0 none yet, 1 exited, 2 killed, 3 dumped core
    main_status: int  # the exit status, or the signal number
    invocation: str
    restarts: int
    memory_max: int | None

    @property
    def ended(self) -> bool:
        """Whether the unit's main process is gone: the unit failed or is inactive after a run, or waits to be
        restarted."""
        if self.main_code == 0:
            return False
        return self.active in ("failed", "inactive") or self.sub == "auto-restart"

    def ended_event(self, unit: str) -> Ended:
        """The `Ended` that says how the main process ended (exit code 0 for a unit systemd counts a success,
        such as `systemctl stop`'s SIGTERM; 128 + N for a signal N otherwise, as a shell says it)."""
        if self.main_code == _EXITED:
            how = f"exited with status {self.main_status}"
            code = self.main_status
        else:
            signal = _SIGNALS.get(self.main_status, f"signal {self.main_status}")
            verb = "dumped core on" if self.main_code == _DUMPED else "was killed by"
            how = f"{verb} {signal}"
            code = 128 + self.main_status
        restarting = self.sub == "auto-restart"
        state = "is being restarted" if restarting else self.active
        detail = f"{unit}: main process {how}; the unit {state} (result {self.result})"
        return Ended(
            detail,
            exit_code=0 if self.result == "success" else code,
            oom_killed=self.result == "oom-kill",
            memory_limit=self.memory_max if self.result == "oom-kill" else None,
            restarting=restarting,
        )


def _int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return 0


def parse_unit_state(text: str) -> UnitState | None:
    """The unit state in `systemctl show -p ...` output (`Key=Value` lines, in any order); None where the state
    command found no systemd (`NO_SYSTEMD`)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    if values.get("NoSystemd") == "yes":
        return None
    memory = values.get("MemoryMax", "")
    return UnitState(
        load=values.get("LoadState", ""),
        active=values.get("ActiveState", ""),
        sub=values.get("SubState", ""),
        result=values.get("Result", ""),
        main_code=_int(values.get("ExecMainCode")),
        main_status=_int(values.get("ExecMainStatus")),
        invocation=values.get("InvocationID", ""),
        restarts=_int(values.get("NRestarts")),
        memory_max=int(memory) if memory.isdigit() else None,
    )


# The remote scripts: fixed text run as `sh -c SCRIPT NAME ARG...`, the values positional arguments (the shape the
# forced-command wrapper of deploy/ssh/ accepts); the same argv runs here without a login shell.
JOURNAL_SCRIPT = f"""\
case $3 in _SYSTEMD_UNIT|SYSLOG_IDENTIFIER) ;; *) exit 2;; esac
m=$1 c=$2
set -- "$3=$4"
o=--output-fields={",".join(OUTPUT_FIELDS)}
j() {{ exec journalctl --quiet --no-pager --output=json --all "$o" "$@"; }}
case $m in
after) j --after-cursor="$c" -- "$1";;
boot) j --boot -- "$1";;
follow-after) j --after-cursor="$c" --follow --no-tail -- "$1";;
follow-boot) j --boot --follow --no-tail -- "$1";;
last) j --boot --lines=1 -- "$1";;
at) journalctl --quiet --no-pager --output=json --all "$o" --cursor="$c" | head -n 1;;
*) exit 2;;
esac
"""
UNIT_SCRIPT = f"""\
if [ -d /run/systemd/system ]; then
  exec systemctl show --property={",".join(UNIT_PROPERTIES)} -- "$1"
fi
echo {NO_SYSTEMD}
"""
_NO_CURSOR = "-"


def read_command(
    match: JournalMatch,
    *,
    after: str | None = None,
    follow: bool = False,
    last: bool = False,
    at: bool = False,
) -> list[str]:
    """The argv that reads the match's entries as JSON: after cursor `after`, else from the start of the current
    boot; `follow` goes on with new entries; `last` gives only the newest entry, `at` the entry at `after`."""
    if last:
        mode = "last"
    elif at:
        mode = "at"
    else:
        mode = ("follow-" if follow else "") + ("after" if after is not None else "boot")
    return [
        "sh",
        "-c",
        JOURNAL_SCRIPT,
        "watchdog-journal",
        mode,
        after or _NO_CURSOR,
        match.field,
        match.value,
    ]


def state_command(unit: str) -> list[str]:
    """The argv that prints the unit's state (`UNIT_PROPERTIES`), or `NO_SYSTEMD` where systemd is not init."""
    return ["sh", "-c", UNIT_SCRIPT, "watchdog-unit", unit]


def _check_reader(runner: Runner, status: int | None, errors: str) -> None:
    """A journalctl that could not read is an error that says what to do; trying again cannot help."""
    if status in (None, 0):
        return
    said = errors.strip().splitlines()[-1][:300] if errors.strip() else f"exit status {status}"
    if _INSUFFICIENT in errors:
        raise UsageError(
            f"cannot read the journal on {runner.where}: {said} (add the account to the group systemd-journal)"
        )
    if status == 127:
        raise UsageError(f"cannot read the journal on {runner.where}: journalctl is not installed ({said})")
    raise UsageError(f"cannot read the journal on {runner.where}: {said}")


class _Restart(Exception):
    """Internal: the follow command ended; start reading again after the last cursor seen."""


class JournaldSource:
    """A unit's or a syslog identifier's journal entries as a stream of lines (see the module docstring).

    The stream is one invocation of the unit (entries carry `_SYSTEMD_INVOCATION_ID`); entries without one
    (`systemd-cat` outside a unit, a container's journald driver) form one stream per boot. Reading from the
    start begins at the unit's current invocation (where systemd says which), else at the boot's first entry.
    """

    def __init__(
        self,
        name: str,
        *,
        pool: SSHPool | None = None,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        state_interval: float = DEFAULT_STATE_INTERVAL,
    ) -> None:
        """Describe what is followed; nothing runs until `open_follow` or `stream_id`.

        Args:
            name: the unit, or `identifier=NAME`.
            pool: the shared SSH connections (needed for a host).
            host: the SSH host (None: this machine).
            port: SSH port (None: from the config, else 22).
            user: remote user (None: from the config, else the local user).
            state_interval: seconds between looks at the unit's state.

        Raises:
            UsageError: the name is not a unit or identifier.
            ValueError: a host without a pool.
        """
        self.match = parse_match(name)
        self.host = host
        self.state_interval = state_interval
        if host is None:
            self._runner: Runner = LocalRunner()
        elif pool is None:
            raise ValueError(f"journald on {host} is remote: an SSHPool is needed to follow it")
        else:
            self._runner = SSHRunner(pool, host, port, user)
        self.systemd: bool | None = None  # whether systemd runs there (None: not asked yet)

    async def unit_state(self) -> UnitState | None:
        """The unit's state; None for an identifier, or where systemd does not run (said once in the log)."""
        unit = self.match.unit
        if unit is None or self.systemd is False:
            return None
        out, _, _ = await run(self._runner, state_command(unit))
        state = parse_unit_state(out.decode(errors="replace"))
        if state is None and self.systemd is None:
            log.warning(
                "no systemd: no unit state, the verdict relies on the log",
                unit=unit,
                where=self._runner.where,
            )
        self.systemd = state is not None
        return state

    async def _entry(self, argv: list[str]) -> Entry | None:
        out, status, errors = await run(self._runner, argv)
        _check_reader(self._runner, status, errors)
        return parse_entry(out.partition(b"\n")[0])

    async def stream_id(self) -> tuple[int, int] | None:
        """The current stream's id: the unit's invocation, else that of the newest entry; None: no entry."""
        state = await self.unit_state()
        if state is not None and state.invocation:
            return stream_id(f"invocation:{state.invocation}")
        entry = await self._entry(read_command(self.match, last=True))
        return None if entry is None else stream_id(stream_key(entry, self.match))

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow from the stream's start, or with `cursor` from just after it, its bytes numbered from `offset`;
        see `watchdog.follow.sources.base.Source`."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        return aclosing(_Follower(self, offset, cursor).items())


class _Follower:
    """The state of one `open_follow`: the position in the journal, the stream and what was said of it."""

    def __init__(self, source: JournaldSource, offset: int, cursor: str | None) -> None:
        self.src = source
        self.offset = offset
        self.position = cursor  # the last entry seen (delivered or not): reading goes on after it
        self.key: str | None = None  # the current stream's key
        self.old_keys: set[str] = set()  # streams left behind: a late entry of one is not a new stream
        self.next_key: str | None = (
            None  # systemd runs a new invocation: the next stream, once this one is read
        )
        self.skip_to: str | None = (
            None  # reading from the start: entries before this invocation are older runs
        )
        self.restarts: int | None = None  # the unit's NRestarts when last looked at
        self.at_end = False
        self.ended_said = False  # Ended was said for the current stream
        self.ended_pending: Ended | None = None  # the unit's end, said once its journal is read to the end
        self.connected = False
        self.down = False

    async def items(self) -> AsyncGenerator[SourceItem, None]:
        failures = 0
        while True:
            try:
                async with aclosing(self._session()) as session:
                    async for item in session:
                        failures = 0
                        yield item
            except (ConnectionLost, ChannelRefused) as exc:
                if (
                    not self.connected
                    and failures + 1 >= CONNECT_ATTEMPTS
                    and isinstance(exc, ConnectionLost)
                ):
                    raise  # a host never reached: an error for `watch`, retried by the daemon
                if not self.down:
                    self.down = True
                    yield Disconnected(self.src.host or "localhost", str(exc))
                failures += 1
                await anyio.sleep(
                    backoff(failures - 1, first=RETRY_INITIAL, cap=RETRY_MAX, jitter=FULL_JITTER)
                )
            except _Restart:
                await anyio.sleep(RETRY_INITIAL)

    async def _session(self) -> AsyncGenerator[SourceItem, None]:
        src = self.src
        state = await src.unit_state()
        if self.key is None and self.position is not None:
            at = await src._entry(read_command(src.match, after=self.position, at=True))
            if at is not None:
                self.key = stream_key(at, src.match)
        elif self.key is None and state is not None and state.invocation:
            self.skip_to = state.invocation
        if state is not None:
            self.restarts = state.restarts
        # the backlog to its end, then the entries as they come
        async with src._runner.open(read_command(src.match, after=self.position)) as output:
            if src.host is not None and (self.down or not self.connected):
                self.down, self.connected = False, True
                yield Connected(src.host)
            async for item in self._read(output, follow=False):
                yield item
        if not self.at_end:
            self.at_end = True
            yield CaughtUp(self.offset)
        async with src._runner.open(read_command(src.match, after=self.position, follow=True)) as output:
            async for item in self._read(output, follow=True):
                yield item

    async def _read(self, output: Output, *, follow: bool) -> AsyncGenerator[SourceItem, None]:
        src = self.src
        polling = follow and src.match.unit is not None and src.systemd is not False
        buffered = b""
        next_poll = anyio.current_time() + src.state_interval
        while True:
            wait = next_poll - anyio.current_time() if polling else None
            if self.at_end and (self.ended_pending is not None or self.next_key is not None):
                wait = ENDED_SETTLE if wait is None else min(wait, ENDED_SETTLE)
            data: bytes | None = b""
            with anyio.move_on_after(wait):
                data = await output.receive()
            if data == b"":  # timed out: the journal was quiet
                if self.at_end:
                    for item in self._settled():
                        yield item
                if polling and anyio.current_time() >= next_poll:
                    next_poll = anyio.current_time() + src.state_interval
                    self._on_state(await src.unit_state())
                continue
            if data is None:
                status, errors = output.ended()
                _check_reader(src._runner, status, errors)
                if follow:
                    raise _Restart()
                return
            buffered += data
            lines = buffered.split(b"\n")
            buffered = lines.pop()
            for item in self._entries(lines):
                yield item
            if follow and not buffered and not self.at_end:
                self.at_end = True
                yield CaughtUp(self.offset)

    def _settled(self) -> list[SourceItem]:
        """What waited for the stream to be read to its end: the unit's end, then its next invocation."""
        items: list[SourceItem] = []
        if self.ended_pending is not None:
            items.append(self.ended_pending)
            self.ended_pending, self.ended_said = None, True
        if self.next_key is not None:
            key, self.next_key = self.next_key, None
            items.extend(self._new_stream(key))
            items.append(CaughtUp(0))
        return items

    def _entries(self, lines: list[bytes]) -> list[SourceItem]:
        """The items of complete JSON lines: chunks (consecutive entries of a stream in one) and new streams."""
        items: list[SourceItem] = []
        data, cursor = b"", None

        def flush() -> None:
            nonlocal data, cursor
            if data:
                items.append(Chunk(self.offset, data, stream_id(self.key or ""), cursor=cursor))
                self.offset += len(data)
                self.at_end = False
            data, cursor = b"", None

        for line in lines:
            entry = parse_entry(line)
            if entry is None:
                continue
            self.position = entry.cursor
            if not entry.matches(self.src.match):
                continue
            if self.skip_to is not None:
                if entry.invocation != self.skip_to:
                    continue  # an earlier run of the unit
                self.skip_to = None
            key = stream_key(entry, self.src.match)
            if key in self.old_keys:
                log.warning("a late entry of an earlier run left out", match=str(self.src.match), key=key)
                continue
            if self.key is None:
                self.key = key
            elif key != self.key:
                flush()
                if self.ended_pending is not None:  # the old stream's end comes before the new stream
                    items.append(self.ended_pending)
                    self.ended_pending = None
                self.next_key = None
                items.extend(self._new_stream(key))
            if entry.message is None:
                continue
            data += entry_line(entry)
            cursor = entry.cursor
        flush()
        return items

    def _new_stream(self, key: str) -> list[SourceItem]:
        if self.key is not None:
            self.old_keys.add(self.key)
        self.key, self.offset = key, 0
        self.ended_said, self.ended_pending = False, None
        return [FileRestarted("restarted")]

    def _on_state(self, state: UnitState | None) -> None:
        """A look at the unit's state: a new invocation is the next stream (an automatic restart ended the
        current one's main process), a main process gone is `Ended`; both are said once the journal is read."""
        unit = self.src.match.unit
        if state is None or unit is None or not state.invocation:
            return
        key = f"invocation:{state.invocation}"
        restarted = self.restarts is not None and state.restarts > self.restarts
        self.restarts = state.restarts
        if self.skip_to is not None:
            self.skip_to = state.invocation  # what was skipped to never wrote an entry
        if self.key is None:
            self.key = key  # a run that wrote nothing yet: its end is still said
        elif key != self.key and key not in self.old_keys and key != self.next_key:
            self.next_key = key
            if restarted and not self.ended_said and self.ended_pending is None:
                self.ended_pending = Ended(
                    f"{unit}: main process ended; systemd restarted the unit (restart {state.restarts})",
                    restarting=True,
                )
        if key == self.key and state.ended and not self.ended_said and self.ended_pending is None:
            self.ended_pending = state.ended_event(unit)


def source(target: Target, pool: SSHPool | None = None) -> JournaldSource:
    """The journald source of `target` (`journald://[user@]host[:port]/UNIT`): the kind's entry in the registry."""
    return JournaldSource(target.path, pool=pool, host=target.host, port=target.port, user=target.user)
