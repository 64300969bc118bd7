"""The shell scripts run on a followed host, the commands that start them, and how to read their output.

Every script runs under `sh -c SCRIPT NAME ARG...` with the arguments passed positionally, so the
user's login shell (bash, zsh, even fish) only has to parse single-quoted words, and no value is
ever interpolated into the script itself.

Header (first line of stdout, then raw file bytes in the streaming and polling scripts):

    missing            the path does not exist (yet)
    unreadable         the path is not a readable regular file
    nofollow           no GNU tail here: use the polling script
    ok INODE SIZE DEV AGE
                       fd 3 is open on the file; its bytes follow from the requested offset (DEV, the
                       file's device, lets a checkpoint name the file without a remote `identify`; AGE, the
                       host's clock less the file's modification time, in whole seconds: how long it has not
                       grown, for `watchdog.follow.sources.base.Aged`)

Status lines of the streaming script, on stderr:

    S FD_INODE FD_SIZE FD_LINKS [PATH_INODE PATH_SIZE PATH_LINKS]
                       the open file, and what the path names now (if anything): at the start, when
                       that changes, and every STAT_INTERVAL while the path names another file
    P PID PGID         the script's process and process group (Linux: read from /proc), after the header: the
                       next reader of this follower is given them, and ends that group if it still runs
                       (a reader whose connection was cut where sshd did not see it, so its stdin never closed)
    W                  from now on the stat loop waits for the path to change (about 1 s after the header)
    E                  the reading tail exited: on its own, or killed once stdin was closed
    tail: ...: file truncated     GNU tail's own notice: it went back to offset 0
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from watchdog.follow.sources.identity import window_spans

# `tail -f` on /dev/fd/3 follows the inode the script opened, whatever happens to the path;
# GNU tail polls a symlinked name (it turns inotify off for those), hence the fine -s interval:
# an fstat every 10 ms is cheap and bounds the added latency.
# The stat loop says a sample when what the path names changed (inode, links: not the size, which the bytes
# themselves tell), and every STAT_INTERVAL while the path names another file than the one read (a rotation:
# the old file's sizes tell when it stopped growing). It does not poll the path: a second GNU tail follows the
# path by name (`-F`: inotify where the kernel gives it, else a stat every STAT_INTERVAL, at most 1 s) and says
# a line for every change it sees (replaced, inaccessible, appeared, truncated), each of which wakes the loop
# for one sample. A stat and a sleep forked 4 times a second cost about 1 % of a core per followed log; waiting
# on that tail costs next to nothing while the path stays put. The first 10 samples are taken 0.1 s apart
# whatever happens (then the loop says W), which covers a rotation between `exec 3<` and that tail's own open.
# If that tail ever exits (it gives up on a path that became a directory, say), the loop samples every
# STAT_INTERVAL again.
# `cat` is the lifeline: it returns when the channel's stdin reaches EOF, which happens when the client closes
# the channel or its connection dies (sshd then closes the session's pipes), and then kills the reading tail.
# The script waits for that tail (so it is reaped, not a zombie that `kill -0` still finds), whether killed or
# gone on its own, then kills the stat loop and says E; the second tail (`--pid`) sees the first one gone within
# STAT_INTERVAL (1 s at most) and exits too: no tail is ever left behind.

STREAM_SCRIPT = """\
p=$1 n=$2 iv=$3 tv=$4
[ "${5:-0}" = 0 ] || { read -r _ _ _ _ g _ <"/proc/$5/stat"; [ "$g" = "$6" ] && case $(tr '\\0' ' ' <"/proc/$5/cmdline")
  in *" watchdog-follow $p "*) kill -- "-$6";; esac; } 2>/dev/null
[ -e "$p" ] || { echo missing; exit 0; }
{ [ -f "$p" ] && [ -r "$p" ]; } || { echo unreadable; exit 0; }
case $(tail --version 2>/dev/null) in *GNU*) ;; *) echo nofollow; exit 0;; esac
exec 3<"$p" 4<&0
set -- $(stat -L -c '%i %s %d %Y' /dev/fd/3); echo ok $1 $2 $3 $(($(date +%s)-$4))
g=; read -r _ _ _ _ g _ </proc/$$/stat 2>/dev/null; echo P $$ $g >&2
tail -s "$tv" -c +"$n" -f /dev/fd/3 4<&- & t=$!
case $iv in 0.*) u=$iv;; *) u=1;; esac
tail -n 0 -s $u --pid=$t -F "$p" 2>&1 >/dev/null 3<&- 4<&- | { o= w=10; while :; do
    c=$(stat -L -c '%i %s %h' /dev/fd/3 "$p" 2>/dev/null); set -- $c; k="$1 $3 ${4-} ${6-}"
    [ "$k" = "$o" ] && [ "$1" = "${4-}" ] || echo S $c
    o=$k d=$iv
    if [ "$1" = "${4-}" ] && [ $w -ge 0 ]; then [ $w = 1 ] && echo W
      if [ $w -le 1 ]; then w=0; read -r _ || w=-1; continue; fi; w=$((w-1)) d=0.1; fi
    sleep "$d" >/dev/null 2>&1 3<&-
  done; } >&2 4<&- & s=$!
{ cat >/dev/null 3<&-; kill $t; } <&4 4<&- & l=$!
wait $t 2>/dev/null; kill $s $l 2>/dev/null; echo E >&2
"""

STREAM_NAME = "watchdog-follow"

# One read of at most $3 bytes from offset $2 (1-based), with the header, for hosts without
# GNU tail; the caller runs it again at once while it returns full reads.
POLL_SCRIPT = """\
p=$1 n=$2 m=$3
[ -e "$p" ] || { echo missing; exit 0; }
{ [ -f "$p" ] && [ -r "$p" ]; } || { echo unreadable; exit 0; }
exec 3<"$p"
set -- $(stat -L -c '%i %s %d %Y' /dev/fd/3); echo ok $1 $2 $3 $(($(date +%s)-$4))
tail -c +"$n" /dev/fd/3 | head -c "$m"
"""

# DEV and AGE: absent from older scripts' output
_OK = re.compile(rb"^ok (\d+) (\d+)(?: (\d+)(?: (-?\d+))?)?$")


def _seconds(value: float) -> str:
    if not value > 0:
        raise ValueError(f"interval must be positive, not {value}")
    return f"{value:.3f}"


def stream_command(
    path: str,
    offset: int,
    *,
    stat_interval: float,
    tail_interval: float,
    previous: tuple[int, int] | None = None,
) -> str:
    """The remote command that streams `path` from byte `offset` (0-based) until stdin closes.

    `previous`: the process and process group of this follower's reader before (its `P` line): the script ends
    that group first if that process is still a reader of the same path (a cut connection left it running).
    """
    args = stream_args(
        path, offset, stat_interval=stat_interval, tail_interval=tail_interval, previous=previous
    )
    return reader_command(STREAM_NAME, args)


def stream_args(
    path: str,
    offset: int,
    *,
    stat_interval: float,
    tail_interval: float,
    previous: tuple[int, int] | None = None,
) -> list[str]:
    """The arguments of `STREAM_SCRIPT` for `stream_command` (and for a multiplexer's `open`)."""
    pid, group = previous or (0, 0)
    return [path, str(offset + 1), _seconds(stat_interval), _seconds(tail_interval), str(pid), str(group)]


def reader_command(name: str, args: list[str]) -> str:
    """The remote command that runs the reader script `name` of `READERS` with `args`: `sh -c SCRIPT NAME ARG...`."""
    return shlex.join(["sh", "-c", READERS[name][0], name, *args])


def poll_command(path: str, offset: int, *, max_bytes: int) -> str:
    """The remote command that reads up to `max_bytes` of `path` from byte `offset` (0-based)."""
    return shlex.join(["sh", "-c", POLL_SCRIPT, "watchdog-poll", path, str(offset + 1), str(max_bytes)])


# What the file at the path is (`watchdog.follow.sources.identity`): device, inode and size of the file opened on
# fd 3, then its first $2 bytes and the $4 bytes from offset $3 (1-based). `head` and `tail` open /dev/fd/3
# afresh (each at offset 0), so both read the one file that was stat'ed.
IDENTITY_SCRIPT = """\
p=$1 h=$2 b=$3 m=$4
[ -e "$p" ] || { echo missing; exit 0; }
{ [ -f "$p" ] && [ -r "$p" ]; } || { echo unreadable; exit 0; }
exec 3<"$p"
echo id $(stat -L -c '%d %i %s' /dev/fd/3)
head -c "$h" /dev/fd/3
tail -c +"$b" /dev/fd/3 | head -c "$m"
"""

IDENTIFY_NAME = "watchdog-identify"

# The readers a multiplexer (`watchdog.follow.sources.mux`) may start, by name: the script and the kinds of its
# arguments, as the forced-command wrapper checks them (path: any text but a newline; int: decimal digits; dec:
# digits.digits). The identity script ends by itself: through the multiplexer a fingerprint check or a checkpoint's
# identification costs no channel of its own (its open, exec, exit status and close: ~10 packets each way)
READERS: dict[str, tuple[str, str]] = {
    STREAM_NAME: (STREAM_SCRIPT, "path int dec dec int int"),
    IDENTIFY_NAME: (IDENTITY_SCRIPT, "path int int int"),
}


def identity_command(path: str, offset: int, *, window: int) -> str:
    """The remote command that identifies `path` at byte `offset` (see `IDENTITY_SCRIPT`): its first `window`
    bytes (fewer before `offset`) and the `window` bytes just before `offset`."""
    return reader_command(IDENTIFY_NAME, identity_args(path, offset, window=window))


def identity_args(path: str, offset: int, *, window: int) -> list[str]:
    """The arguments of `IDENTITY_SCRIPT` for `identity_command` (and for a multiplexer's `open`)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, not {offset!r}")
    head, start, length = window_spans(offset, window)
    return [path, str(head), str(start + 1), str(length)]


@dataclass(frozen=True)
class Header:
    """The first line of a script's output."""

    status: str
    inode: int = 0
    size: int = 0
    device: int | None = None  # for `ok`: the file's device (None where the script did not say it)
    # for `ok`: whole seconds since the file was modified, by the host's clock (None where not said); its
    # modification time is truncated to the second, so the file may have grown up to a second later than this says
    age: int | None = None


def parse_header(line: bytes) -> Header | None:
    """Read a header line (without its newline); None if it is not one."""
    match = _OK.match(line)
    if match is not None:
        device = int(match[3]) if match[3] is not None else None
        age = int(match[4]) if match[4] is not None else None
        return Header("ok", int(match[1]), int(match[2]), device, age)
    if line in (b"missing", b"unreadable", b"nofollow"):
        return Header(line.decode())
    return None


def parse_process_line(line: bytes) -> tuple[int, int] | None:
    """Read a `P PID PGID` status line; None if it is not one."""
    fields = line.split()
    if len(fields) != 3 or fields[0] != b"P" or not all(field.isdigit() for field in fields[1:]):
        return None
    return int(fields[1]), int(fields[2])


@dataclass(frozen=True)
class StatLine:
    """One sample of the streaming script's stat loop."""

    inode: int
    size: int
    links: int
    path_inode: int | None  # what the path names now (None: nothing)


def parse_stat_line(line: bytes) -> StatLine | None:
    """Read an `S ...` status line; None if it is not one (or was garbled)."""
    fields = line.split()
    if not fields or fields[0] != b"S" or len(fields) not in (4, 7):
        return None
    try:
        numbers = [int(field) for field in fields[1:]]
    except ValueError:
        return None
    return StatLine(numbers[0], numbers[1], numbers[2], numbers[3] if len(numbers) == 6 else None)
