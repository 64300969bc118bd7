"""The words every layer shares, each said once: states, categories, engines, exit codes, defaults, durations.

Everything else derives from here; `tests/test_layers.py` fails if a copy reappears. This module imports
nothing of ours and nothing slow: the bottom of the package.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import math
import re
import stat
from urllib.parse import urlsplit

__all__ = [
    "ARGUMENT_FLAG_STYLES",
    "ARGUMENT_SYNTAXES",
    "BAR_OF_PHASE",
    "DEADLINE_STATES",
    "DEFAULT_CRASH_GRACE",
    "DEFAULT_DELIVERY_ATTEMPTS",
    "DEFAULT_DELIVERY_BACKOFF",
    "DEFAULT_DELIVERY_TIMEOUT",
    "DEFAULT_GPU_INTERVAL",
    "DEFAULT_HANG_AFTER",
    "DEFAULT_LISTEN",
    "DEFAULT_LOG_FORMAT",
    "DEFAULT_PROBE_INTERVAL",
    "DEFAULT_RATE_LIMIT",
    "DEFAULT_STALL_AFTER",
    "DEFAULT_STATE_DIR",
    "DEFAULT_STAT_INTERVAL",
    "DEFAULT_STOP_GRACE",
    "DEFAULT_UNREACHABLE_AFTER",
    "DISTRIBUTION",
    "DURATIONS",
    "DURATION_PATTERN",
    "ENGINES",
    "ENGINE_CHOICES",
    "EXIT_CONFIG",
    "EXIT_CRASHED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NO_VERDICT",
    "EXIT_READY",
    "EXIT_STALLED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "FATAL_WHEN_LOGGED",
    "FATAL_WHILE_STARTING",
    "GENERIC_CATEGORIES",
    "LEGACY_STATE_DIR",
    "LOG_FORMATS",
    "MAX_INCARNATIONS_PER_LAUNCH",
    "OUTCOMES",
    "PAST_INCARNATIONS_HELD",
    "PID_MAX_LIMIT",
    "PROBLEM_STATES",
    "PROGRESS_STATES",
    "RUNBOOK_URL",
    "SETTLED_STATES",
    "STARTUP_PHASES",
    "STARTUP_TIME_STATES",
    "SUCCESS_STATES",
    "TERMINAL_STATES",
    "UNBEGUN_STATES",
    "VERDICTS",
    "WEAK_CATEGORIES",
    "Category",
    "State",
    "check_http_url",
    "check_pattern",
    "check_process",
    "file_kind",
    "format_duration",
    "is_loopback",
    "is_ssh_word",
    "parse_duration",
    "parse_pid",
    "pid_file_of",
    "remote_relative",
    "runbook_url",
    "split_listen",
    "version",
]

DISTRIBUTION = "llm-launch-watchdog"  # the PyPI name (the import package `watchdog` shares its directory)


@functools.cache
def version() -> str:
    """This package's version, "0+unknown" when it is not installed."""
    from importlib.metadata import PackageNotFoundError  # noqa: PLC0415 - keep `--version` lean
    from importlib.metadata import version as _version  # noqa: PLC0415

    try:
        return _version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


# -- states (DESIGN.md) -----------------------------------------------------------------------------------


class State(enum.Enum):
    """Where a launch is (DESIGN.md)."""

    PENDING = "pending"  # configured, no log yet
    STARTING = "starting"  # process start, arguments, distributed init
    LOADING_WEIGHTS = "loading_weights"  # checkpoint shards loading
    ALLOCATING_KV_CACHE = "allocating_kv_cache"  # memory profiling, KV cache, scheduler init
    CAPTURING_GRAPHS = "capturing_graphs"  # CUDA graphs, torch.compile, warm-up
    READY = "ready"  # the server can serve
    CRASHED = "crashed"  # a fatal error ended it (outcome)
    STALLED = "stalled"  # no progress for too long (outcome, left again on progress)
    STOPPED = "stopped"  # clean, intended exit (outcome)


STARTUP_PHASES = (State.STARTING, State.LOADING_WEIGHTS, State.ALLOCATING_KV_CACHE, State.CAPTURING_GRAPHS)
"""The startup phases, in the order a launch goes through them."""
DEADLINE_STATES = (State.PENDING, *STARTUP_PHASES)
"""The states a stall clock runs in, each with its deadline (`[launches.NAME] deadlines`)."""
PROGRESS_STATES = (*STARTUP_PHASES, State.READY)
"""The states progress moves a launch through, in order: the startup phases, then ready (its `phase`)."""
STARTUP_TIME_STATES = (*STARTUP_PHASES, State.STALLED)
"""The states whose time is startup time: the phases, and stalled in one (`watchdog history`'s rows)."""
OUTCOMES = (State.CRASHED, State.STALLED, State.STOPPED)
"""The verdicts other than ready: each is said with the phase it came in ("crashed in loading_weights")."""
VERDICTS = (State.READY, *OUTCOMES)
"""The states that answer `watch`: it stops at the first of them."""
TERMINAL_STATES = (State.CRASHED, State.STOPPED)
"""The states that end an incarnation: only a new start (a new incarnation) follows them."""
SETTLED_STATES = (State.READY, *TERMINAL_STATES)
"""The states whose time does not run: no stall clock, no phase duration that grows."""
SUCCESS_STATES = (State.READY, State.STOPPED)
"""The states of an incarnation that went well: the usual phase durations are learned from them."""
PROBLEM_STATES = (State.STALLED, State.CRASHED)
"""The states that page (their alerts); a stalled launch that goes to any other made progress again."""
UNBEGUN_STATES = (State.PENDING, State.STALLED)
"""The states of an incarnation nothing of which was seen yet (stalled: waiting for its log)."""
BAR_OF_PHASE = {State.LOADING_WEIGHTS: "weights", State.CAPTURING_GRAPHS: "graphs"}
"""The progress bar that measures a phase (its `[[progress]]` name in a profile)."""


class Category(enum.StrEnum):
    """What kind of failure ended a launch (DESIGN.md: the `error.category` of the JSON contract)."""

    OOM = "oom"
    CUDA = "cuda"
    NCCL = "nccl"
    ASSERTION = "assertion"
    IMPORT = "import"
    PORT_IN_USE = "port_in_use"
    CONFIG = "config"
    MODEL_LOAD = "model_load"
    KILLED = "killed"
    TIMEOUT = "timeout"
    UNSUPPORTED = "unsupported"
    OTHER = "other"


FATAL_WHEN_LOGGED = (Category.PORT_IN_USE, Category.OOM)
"""Errors no engine starts past, even only logged: a port it cannot bind, memory it cannot get (at start)."""
FATAL_WHILE_STARTING = (
    *FATAL_WHEN_LOGGED,
    Category.CONFIG,
    Category.MODEL_LOAD,
    Category.UNSUPPORTED,
    Category.IMPORT,
)
"""... and, raised as an exception (or named by a rule), its configuration, model or hardware refused, or a library
it cannot import (an uncaught ImportError while starting ends the process; an optional import's failure is logged
at warning level, not raised)."""
WEAK_CATEGORIES = (Category.OTHER, Category.TIMEOUT)
"""The categories that alone do not make an error-level log line a root-cause candidate."""
GENERIC_CATEGORIES = (*WEAK_CATEGORIES, Category.KILLED)
"""The categories that say least of a cause: a root cause of one ranks below any other's."""


ENGINES = ("sglang", "vllm", "tgi", "trtllm", "llamacpp", "ollama", "generic")
"""The engines with a bundled profile (`watchdog/profiles/<engine>.toml`)."""
ENGINE_CHOICES = ("auto", *ENGINES)

# How an engine writes the dump of its arguments (a profile's [[arguments]] `syntax`; read by
# watchdog.core.arguments)
ARGUMENT_SYNTAXES = (
    "python-kwargs",  # Name(a=1, b='x'): a dataclass or argparse Namespace repr (SGLang, older vLLM, TRT-LLM)
    "python-dict",  # {'a': 1, 'b': 'x'} (vLLM's non-default args, SGLang's server_args={...})
    "rust-debug",  # Name { a: 1, b: "x" }, on one line or pretty over many (TGI's Args)
    "go-map",  # map[A:1 B:x] (Ollama's server config env)
    "argv",  # a command line: --a 1 --b=x --flag
    "line",  # one argument a line: the rule's regex names it (?P<name>...) and its (?P<value>...)
)
# How a dump's names read as the engine's command-line flags (a profile's [[arguments]] `flags`)
ARGUMENT_FLAG_STYLES = (
    "kebab",  # argparse / clap dest names: mem_fraction_static -> --mem-fraction-static
    "name",  # config fields, environment variables, flags already: as written
)

# -- exit codes of the command line (DESIGN.md; a compatibility contract) --------------------------------

EXIT_READY = 0
EXIT_CRASHED = 1
EXIT_STALLED = 2  # also: timed out
EXIT_NO_VERDICT = 3  # the log ended still starting, or stopped cleanly
EXIT_USAGE = 64  # EX_USAGE: bad command line, unreadable input file
EXIT_UNREACHABLE = 69  # EX_UNAVAILABLE: SSH, authentication, host key
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in watchdog, not a verdict about the server
EXIT_CONFIG = 78  # EX_CONFIG: invalid configuration or profile file
EXIT_INTERRUPTED = 130  # Ctrl-C (and a second SIGTERM to the daemon: stop at once)

# -- defaults (the config file's, the command line's and the library's) ----------------------------------

DEFAULT_STALL_AFTER = 600.0  # seconds without progress before a launch is stalled
DEFAULT_HANG_AFTER = 300.0  # seconds a ready server may have requests waiting and generate no token (a hang)
DEFAULT_CRASH_GRACE = 5.0  # seconds an error nothing marks as fatal waits for progress that would excuse it
DEFAULT_PROBE_INTERVAL = 2.0  # seconds between process and health probes
DEFAULT_GPU_INTERVAL = 5.0  # seconds between GPU readings of a host
DEFAULT_UNREACHABLE_AFTER = 60.0  # seconds a host stays unreachable before it is an alert
DEFAULT_STAT_INTERVAL = 0.25  # seconds between the remote stat loop's looks at what the followed path names
DEFAULT_STOP_GRACE = 30.0  # seconds a launch's process group is given after SIGTERM before SIGKILL
DEFAULT_LISTEN = "127.0.0.1:9469"
DEFAULT_STATE_DIR = "/var/lib/llm-launch-watchdog"
# The default before the rename to llm-launch-watchdog (Debian's `watchdog` package): a daemon on the new default
# refuses to start a new state while this one holds a state file (store.refuse_legacy_state).
LEGACY_STATE_DIR = "/var/lib/watchdog"
LOG_FORMATS = ("json", "console")
DEFAULT_LOG_FORMAT = "json"
# The daemon's event loop: asyncio's own, or uvloop's (libuv; the `fast` extra installs it)
EVENT_LOOPS = ("asyncio", "uvloop")
DEFAULT_EVENT_LOOP = "asyncio"
DEFAULT_RATE_LIMIT = 30  # alerts per minute a notifier sends at most; more wait their turn (none dropped)
DEFAULT_DELIVERY_TIMEOUT = 10.0  # seconds one delivery attempt may take
# attempts of one delivery before the outbox takes it over (or `watch` gives up)
DEFAULT_DELIVERY_ATTEMPTS = 4
DEFAULT_DELIVERY_BACKOFF = 0.5  # seconds before the second attempt (doubled per attempt, with jitter)
# Past incarnations of a launch kept in the state file (older ones are pruned with their rows: `watchdog history`)
MAX_INCARNATIONS_PER_LAUNCH = 50
# ... and held by a follower's lifecycle (in memory and in its checkpoint): a verdict compares its incarnation with
# the one before, a crash report being settled needs its own; a crash loop must not grow the daemon's memory by
# each past one (~8.6 KB a launch's incarnation: 200 launches x 50 was ~86 MB more after a quarter of an hour)
PAST_INCARNATIONS_HELD = 10
# Where each alert's `runbook_url` points (its section, `#<alertname in lower case>`): docs/runbooks.md of
# the project's repository. Overridable: `watchdog print-rules --runbook-url`, the alertmanager notifier's
# `runbook_url` option (a team's own copy of the runbooks, e.g. on its wiki).
RUNBOOK_URL = "https://github.com/llm-launch-watchdog/llm-launch-watchdog/blob/main/docs/runbooks.md"


def runbook_url(alertname: str, base: str = RUNBOOK_URL) -> str:
    """The address of `alertname`'s section of the runbooks at `base` (GitHub's anchor of its heading)."""
    return f"{base}#{alertname.lower()}"


# -- durations: one grammar for the config file and the command line -------------------------------------

DURATIONS = 'a positive duration: seconds (90) or with units, such as "90s", "10m", "1h30m", "1.5h", "2d"'
DURATION_PATTERN = r"^(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?$"
_DURATION = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: object) -> float:
    """Parse a duration, seconds as a number or a string with units d, h, m, s in that order, each at most
    once (`90`, `"90s"`, `"1h30m"`, `"1.5h"`, `"2d"`): finite seconds, more than 0.

    Raises:
        ValueError: anything else (the message says what is allowed).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"must be {DURATIONS}")
    if isinstance(value, str):
        text = value.strip()
        match = _DURATION.match(text)
        # "1h30" is refused: a bare number is seconds only when it stands alone.
        if not text or match is None or (not text[-1].isalpha() and not text.replace(".", "", 1).isdigit()):
            raise ValueError(f"{value!r} is not a duration: give {DURATIONS}")
        seconds = sum(float(part) * _UNIT_SECONDS[unit] for unit, part in match.groupdict().items() if part)
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{value!r} is not a duration: give {DURATIONS}")
    return seconds


def format_duration(seconds: float) -> str:
    """4.2s, 7m12s, 1h03m, 1d01h: the one form of a duration for people (the status page's `dur` agrees)."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = round(seconds)
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


# -- validators shared by the command line and the config file ---------------------------------------------

_URL_FORMS = "expected http://host[:port]/path or https://host[:port]/path"
_HOST_PUNCTUATION = frozenset("-._:%")


def check_http_url(text: str, *, secret: bool) -> str:
    """Check an http(s) URL (a webhook's, a health endpoint's) and give it back unchanged.

    With `secret`, messages show `scheme://host[:port]` at most: webhook URLs carry their token in the rest.

    Raises:
        ValueError: not an http(s) URL with a host and a port from 1 to 65535 (the message says why).
    """
    shown = "" if secret else f" {text!r}"
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise ValueError(f"URL{shown} contains spaces or control characters; {_URL_FORMS}")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise ValueError(f"invalid URL{shown}: {exc}; {_URL_FORMS}") from None
    hostport = parts.netloc.rpartition("@")[2]
    where = f" {parts.scheme}://{hostport}" if secret and parts.scheme and hostport else shown
    if parts.scheme.lower() not in ("http", "https"):
        problem = f"unsupported scheme {parts.scheme!r}" if parts.scheme else "not an http(s) URL"
        hidden = " (not shown: webhook URLs carry secrets)" if secret and not where else ""
        raise ValueError(f"{problem}{hidden}; {_URL_FORMS}")
    host = parts.hostname
    if not host:
        raise ValueError(f"URL{where} has no host; {_URL_FORMS}")
    if not all(ch.isalnum() or ch in _HOST_PUNCTUATION for ch in host):
        raise ValueError(f"URL{where}: {host!r} is not a valid host name or address")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"URL{where} has an invalid port: a port is a number from 1 to 65535")
    return text


def file_kind(mode: int) -> str | None:
    """The kind of file an `st_mode` names, for messages: None for a regular file, else "a FIFO", ..."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def check_pattern(text: str) -> str:
    """A `pgrep -f` pattern (`--process`, a launch's `process`), unchanged; ValueError: blank, not one line, NUL."""
    if not text.strip():
        raise ValueError(
            "the pattern is empty: give a part of the server's command line (a `pgrep -f` pattern)"
        )
    if any(ch in text for ch in "\n\r\0"):
        raise ValueError("the pattern must be one line, without NUL characters")
    return text


PID_MAX_LIMIT = 1 << 22  # Linux's on 64-bit machines: /proc/sys/kernel/pid_max is at most this, pids below it
_PIDS = f"a process id is a number from 1 to {PID_MAX_LIMIT - 1} (Linux's pid_max limit)"


def parse_pid(value: int | str) -> int:
    """A process id, from a number or its decimal text; ValueError: not a number, or not from 1 to pid_max."""
    try:
        pid = int(value.strip(), 10) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"{value!r} is not a process id: {_PIDS}") from None
    if not 0 < pid < PID_MAX_LIMIT:
        raise ValueError(f"{pid} is not a valid process id: {_PIDS}")
    return pid


def check_process(
    pid: int | None, pattern: str | None, pid_file: str | None, *, names: tuple[str, str, str]
) -> None:
    """Check how a server's process is named: by at most one of a pid (`parse_pid`), a `pgrep -f` pattern
    (`check_pattern`) and a pid file (a path), called `names` in messages; ValueError says what is wrong."""
    given = [name for name, value in zip(names, (pid, pattern, pid_file), strict=True) if value is not None]
    if len(given) > 1:
        raise ValueError(f"{given[0]} and {given[1]} are exclusive: give one, not both")
    if pid is not None:
        parse_pid(pid)
    if pattern is not None:
        check_pattern(pattern)
    if pid_file is not None and (not pid_file or "\0" in pid_file):
        raise ValueError("the pid file must be a path")


_BAD_SSH_WORD = re.compile(r"[\s/@'\"`$;&|<>\\]")


def is_ssh_word(word: str) -> bool:
    """Whether `word` may be an SSH host or user: not empty, no spaces, quotes, '/', '@' or a leading '-'."""
    return bool(word) and not _BAD_SSH_WORD.search(word) and not word.startswith("-")


def pid_file_of(log: str) -> str:
    """Where launch mode writes the pid of the server whose output goes to `log`: beside it, `log + ".pid"`."""
    return f"{log}.pid"


def remote_relative(path: str) -> str:
    """A remote path as the remote command (run in the home directory) takes it: "~/x" is "x", "~" is ""."""
    return "" if path in ("~", "~/") else path[2:] if path.startswith("~/") else path


_HOSTNAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})$")
_LISTEN_FORMS = (
    'give "host:port", e.g. "127.0.0.1:9469", "0.0.0.0:9469" or "[::1]:9469" (port 0: any free port)'
)


def split_listen(value: str) -> tuple[str, int]:
    """(host to bind, without brackets; port, 0: any free one) of "host:port"; ValueError says what is wrong."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"{value!r} is not a listen address: {_LISTEN_FORMS}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{value!r}: {host!r} is not an IPv6 address; {_LISTEN_FORMS}") from None
    elif ":" in host:
        raise ValueError(f"{value!r}: write an IPv6 address in brackets; {_LISTEN_FORMS}")
    elif not _HOSTNAME.match(host):
        raise ValueError(f"{value!r}: {host!r} is not a host name or address; {_LISTEN_FORMS}")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"{value!r}: port {port} is out of range 0-65535")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (localhost, 127.0.0.0/8, ::1); a host name may be anything."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
