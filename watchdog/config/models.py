"""The config file's models: frozen pydantic models of each table, their field rules and the rules across tables.

`load_config(path)` (config/loading.py) is the one loader: it reads the file, resolves the secret references (`env:NAME`,
`file:/path`) and validates the result into `Config`; every problem is a `ConfigError` that names the file,
the key path (`launches.kimi-ep.stall_after`) and what is allowed. The models do no I/O, so
`Config.model_validate(data)` (tests, `watchdog demo`) checks the same rules, secrets taken as given.
The key names are a contract (DESIGN.md, docs/config.md): more keys may be added, none renamed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import posixpath
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

import watchdog.alerts.notifiers as notifier_kinds
from watchdog.alerts.alert import DEFAULT_ON, SEVERITIES, SEVERITY, AlertKind
from watchdog.alerts.notifiers.webhook import check_template
from watchdog.config.shard import parse_shard
from watchdog.core.expectations import LEARN_FACTOR
from watchdog.exceptions import ConfigError, ConfigRuleError, UsageError
from watchdog.follow.sources.kinds import FILE, KINDS
from watchdog.follow.sources.target import Target, parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.profiles.loader import load_profile_file
from watchdog.vocabulary import (
    DEFAULT_EVENT_LOOP,
    DEFAULT_GPU_INTERVAL,
    DEFAULT_HANG_AFTER,
    DEFAULT_LISTEN,
    DEFAULT_LOG_FORMAT,
    DEFAULT_RATE_LIMIT,
    DEFAULT_STALL_AFTER,
    DEFAULT_STAT_INTERVAL,
    DEFAULT_STATE_DIR,
    DEFAULT_STOP_GRACE,
    DEFAULT_UNREACHABLE_AFTER,
    DURATION_PATTERN,
    DURATIONS,
    ENGINE_CHOICES,
    EVENT_LOOPS,
    LOG_FORMATS,
    check_http_url,
    check_pattern,
    check_process,
    is_loopback,
    is_ssh_word,
    parse_duration,
    pid_file_of,
    remote_relative,
    split_listen,
)

DEFAULT_MAX_CHANNELS = 10  # sshd's MaxSessions default: channels one connection may carry
MAX_CHANNELS_LIMIT = 1000
NOTIFIER_KINDS = (*notifier_kinds.KINDS, "apprise", "console")
ALERT_KINDS = tuple(kind.value for kind in AlertKind)
DEFAULT_ALERT_ON = tuple(kind.value for kind in DEFAULT_ON)
SECRET_SHOWN = "**********"  # noqa: S105 - the mask shown instead of a secret
SECRET_FILE_LIMIT = 64 * 1024  # bytes: a secret file is a token or a URL, not a log
# Labels the metrics already use, and the ones Prometheus reserves: extra labels may not shadow them.
RESERVED_LABELS = frozenset(
    {
        "launch",
        "host",
        "engine",
        "phase",
        "state",
        "category",
        "notifier",
        "job",
        "instance",
        "le",
        "quantile",
    }
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NAMES = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a label's name, an environment variable's name
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO must not hang the loader


_N = TypeVar("_N", int, float)
Loc = tuple[str | int, ...]  # a key's place: ("launches", "kimi-ep", "notify", 0)


# A rule of the whole config broke at `key`; `parse_config` puts the file's name on it.
_KeyProblem = ConfigRuleError


# -- field types -----------------------------------------------------------------------------------------


def _check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{value!r} is not a valid name: use {_NAMES}")
    return value


def _check_path(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty: give an absolute path")
    if "\0" in value or "\n" in value:
        raise ValueError("may not contain NUL or newline characters")
    if not value.startswith(("/", "~")):
        raise ValueError(f"{value!r} is relative: give an absolute path (or one starting with ~/)")
    return value


def _check_ssh_word(value: str) -> str:
    if not is_ssh_word(value):
        raise ValueError(f"{value!r} is not valid here: no spaces, quotes, '/', '@' or a leading '-'")
    return value


def _within(low: float, high: float, problem: str) -> AfterValidator:
    """A range check: out of [low, high], `problem` formatted with the value is the error."""

    def check(value: _N) -> _N:
        if not low <= value <= high:
            raise ValueError(problem.format(value))
        return value

    return AfterValidator(check)


def _one_of(what: str, allowed: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
        return value

    return AfterValidator(check)


def _check_event_loop(value: str) -> str:
    if value == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise ValueError(
            "uvloop is not installed here: install it (pip install 'llm-launch-watchdog[fast]') or use \"asyncio\""
        )
    return value


def _check_runbook_url(value: str) -> str:
    check_http_url(value, secret=False)
    if "#" in value:
        raise ValueError(
            f"{value!r} has a #fragment: give the runbooks' address, each alert adds #<alertname>"
        )
    return value


def _check_shard(value: str) -> str:
    parse_shard(value)  # InvalidShard is a ValueError: reported with the key path
    return value


def _check_public_url(value: str) -> str:
    check_http_url(value, secret=True)
    return value.rstrip("/")


def _check_labels(value: dict[str, str]) -> dict[str, str]:
    for label in value:
        if not _IDENTIFIER.match(label) or label.startswith("__"):
            raise ValueError(
                f"{label!r} is not a label name: letters, digits and '_', not starting with '__'"
            )
        if label in RESERVED_LABELS:
            raise ValueError(
                f"label {label!r} is reserved; use another name than {', '.join(sorted(RESERVED_LABELS))}"
            )
    return value


def _check_env(value: dict[str, str]) -> dict[str, str]:
    for key, text in value.items():
        if not _IDENTIFIER.match(key):
            raise ValueError(
                f"{key!r} is not a variable name: letters, digits and _, not starting with a digit"
            )
        if "\0" in text:
            raise ValueError(f"the value of {key} may not contain NUL characters")
    return value


def _check_listen(value: str) -> str:
    split_listen(value)
    return value


PROBE_TOKEN_MIN = 16  # characters: a probe token is made by a machine (`openssl rand -hex 32`), not a person
_TOKEN68 = re.compile(r"^[A-Za-z0-9._~+/-]+=*$")  # RFC 6750's b64token: what a Bearer header may carry


def _check_probe_token(value: SecretStr) -> SecretStr:
    # the message never repeats the value: it is a secret
    token = value.get_secret_value()
    if len(token) < PROBE_TOKEN_MIN or not _TOKEN68.match(token):
        raise ValueError(
            f"a probe token is at least {PROBE_TOKEN_MIN} characters of letters, digits and -._~+/ "
            "(e.g. the output of `openssl rand -hex 32`), given as the value, env:NAME or file:/path"
        )
    return value


def _secret_schema(description: str) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "writeOnly": True, "description": description})


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
            ],
            "description": DURATIONS,
        }
    ),
]
Name = Annotated[StrictStr, AfterValidator(_check_name)]
Port = Annotated[
    StrictInt,
    _within(1, 65535, "{} is not a port: give a number from 1 to 65535"),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 65535}),
]
AbsPath = Annotated[StrictStr, AfterValidator(_check_path), Field(json_schema_extra={"format": "path"})]
SSHWord = Annotated[StrictStr, AfterValidator(_check_ssh_word)]
Secret = Annotated[SecretStr, _secret_schema("a secret: the value, env:NAME or file:/path")]
ProbeToken = Annotated[
    SecretStr,
    AfterValidator(_check_probe_token),
    _secret_schema(f"a secret of at least {PROBE_TOKEN_MIN} characters: the value, env:NAME or file:/path"),
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=False)


# -- sections --------------------------------------------------------------------------------------------


class DaemonConfig(_Model):
    """[daemon]: the daemon process: its one HTTP server, its state and its logs."""

    listen: Annotated[StrictStr, AfterValidator(_check_listen)] = Field(
        default=DEFAULT_LISTEN,
        description="host:port of the HTTP server (/metrics, /status, /healthz, /); "
        "not loopback needs TLS and basic auth, or insecure_public = true",
    )
    state_dir: AbsPath = Field(
        default=DEFAULT_STATE_DIR, description="directory of the SQLite state, outbox and history"
    )
    log_format: Annotated[StrictStr, _one_of("log format", LOG_FORMATS)] = Field(
        default=DEFAULT_LOG_FORMAT,
        description='"json" (one object per line) or "console"',
        json_schema_extra={"enum": list(LOG_FORMATS)},
    )
    event_loop: Annotated[
        StrictStr, _one_of("event loop", EVENT_LOOPS), AfterValidator(_check_event_loop)
    ] = Field(
        default=DEFAULT_EVENT_LOOP,
        description='"asyncio" or "uvloop" (libuv\'s loop: a little less CPU; needs the uvloop package, which '
        "the `fast` extra installs); read at the start, not at a reload",
        json_schema_extra={"enum": list(EVENT_LOOPS)},
    )
    tls_cert: AbsPath | None = Field(
        default=None, description="PEM certificate (chain) for HTTPS; needs tls_key"
    )
    tls_key: AbsPath | None = Field(default=None, description="PEM private key of tls_cert")
    basic_auth_user: StrictStr | None = Field(
        default=None, description="user name HTTP clients must give; needs basic_auth_password"
    )
    basic_auth_password: Secret | None = Field(
        default=None, description="password of basic_auth_user (a secret)"
    )
    probe_token: ProbeToken | None = Field(
        default=None,
        description="a bearer token (a secret) that /launches/NAME/ready takes besides basic auth, for probes "
        "(`Authorization: Bearer TOKEN`, `watchdog probe`); no other path takes it",
    )
    insecure_public: StrictBool = Field(
        default=False, description="allow a non-loopback listen address without TLS and basic auth"
    )
    public_url: Annotated[StrictStr, AfterValidator(_check_public_url)] | None = Field(
        default=None,
        description="the status page's address as people reach it, for the links in alerts "
        "(default: http://LISTEN)",
    )
    shard: Annotated[StrictStr, AfterValidator(_check_shard)] | None = Field(
        default=None,
        description='"INDEX/COUNT": follow only this replica\'s share of the launches (rendezvous hashing of '
        "their names; `watchdog run --shard` overrides it); none: all of them",
    )
    unreachable_after: Duration = Field(
        default=DEFAULT_UNREACHABLE_AFTER,
        description="a host that cannot be reached (or refuses the key) for this long is an alert",
    )
    hang_after: Duration = Field(
        default=DEFAULT_HANG_AFTER,
        description="a ready launch whose serving lines show requests running or waiting and no token generated "
        "for this long is stalled (a serving hang); the default of each launch's hang_after",
    )

    @property
    def listen_host(self) -> str:
        """The address to bind (IPv6 without brackets)."""
        return split_listen(self.listen)[0]

    @property
    def listen_port(self) -> int:
        """The port to bind (0: any free port)."""
        return split_listen(self.listen)[1]

    @property
    def listen_is_loopback(self) -> bool:
        """Whether only this machine can reach the HTTP server."""
        return is_loopback(self.listen_host)


class HostConfig(_Model):
    """[hosts.NAME]: a machine reached over SSH; its launches share one connection (more when it is full)."""

    address: SSHWord | None = Field(
        default=None, description="host name, IP address or ~/.ssh/config alias (default: the table's NAME)"
    )
    port: Port | None = Field(default=None, description="SSH port (default: from ~/.ssh/config, else 22)")
    user: SSHWord | None = Field(
        default=None, description="SSH user (default: from ~/.ssh/config, else the local user)"
    )
    identity: AbsPath | None = Field(
        default=None, description="private key file, offered after the agent's keys"
    )
    known_hosts: AbsPath | None = Field(
        default=None, description="known_hosts file to check the host key against"
    )
    accept_new_host_key: StrictBool = Field(
        default=False,
        description="trust an unknown host key and add it to known_hosts (a changed key is refused)",
    )
    runtime: Literal["docker", "podman"] = Field(
        default="docker", description="the container runtime of the host's launches that name a container"
    )
    jump_host: Name | None = Field(
        default=None, description="another [hosts] entry to connect through (ProxyJump)"
    )
    max_channels: Annotated[
        StrictInt,
        _within(
            1,
            MAX_CHANNELS_LIMIT,
            f"{{}} is not allowed: give a number of channels from 1 to {MAX_CHANNELS_LIMIT}",
        ),
    ] = Field(
        default=DEFAULT_MAX_CHANNELS,
        json_schema_extra={"minimum": 1, "maximum": MAX_CHANNELS_LIMIT},
        description="channels opened on one connection before another is opened (sshd MaxSessions)",
    )
    stat_interval: Annotated[
        Duration, _within(0.05, 60.0, "{:g}s is out of range: give a duration from 0.05s to 1m")
    ] = Field(
        default=DEFAULT_STAT_INTERVAL,
        description="how often each log's reader on the host looks at what the log's path names where inotify "
        "cannot tell it (NFS, say; at most every 1 s), and samples the old file during a rotation (0.05 s to "
        "1 m): longer notices a rotation there later",
    )
    ssh_multiplex: Literal["auto", "off"] = Field(
        default="auto",
        description="auto: the host's log readers share one SSH channel, through a small python3 program on the "
        "host (one packet for many logs' lines), where python3 runs there; else, and off, one channel per log",
    )


class Deadlines(_Model):
    """deadlines = { PHASE = DURATION }: the longest a launch may spend in a phase before it is `stalled`."""

    pending: Duration | None = Field(default=None, description="for the log to appear")
    starting: Duration | None = Field(default=None, description="from the first line to loading weights")
    loading_weights: Duration | None = Field(default=None, description="checkpoint loading")
    allocating_kv_cache: Duration | None = Field(default=None, description="memory profiling and KV cache")
    capturing_graphs: Duration | None = Field(default=None, description="CUDA graphs, torch.compile, warm-up")

    def by_phase(self) -> dict[str, float]:
        """The deadlines that are set, in seconds, by phase name (a `watchdog.core.lifecycle.State` value)."""
        return {phase: seconds for phase, seconds in self.model_dump().items() if seconds is not None}


# the kinds a launch may name, each by its key (podman is docker's key on a host whose runtime is podman)
_CONFIG_KINDS = tuple(k for k in KINDS.values() if k.config_key is not None and k.name != "podman")


# the keys of a launch that name its one source (and its process): a launch with `nodes` gives them per node
NODE_KEYS = (
    "host",
    "log",
    "container",
    "unit",
    "pod",
    "selector",
    "namespace",
    "context",
    "kubeconfig",
    "process",
    "pid_file",
    "health_url",
)


class NodeConfig(_Model):
    """nodes = [{...}, ...]: one node of a multi-node launch (SGLang --nnodes, vLLM over Ray, TensorRT-LLM over
    MPI): its own source (any kind a launch takes) and process; the launch is one lifecycle (docs/nodes.md)."""

    model_config = ConfigDict(
        **_Model.model_config,
        json_schema_extra={"oneOf": [{"required": [k.config_key]} for k in _CONFIG_KINDS]},
    )

    name: Name | None = Field(
        default=None, description="the node's name in verdicts and alerts (default: its host, else node<i>)"
    )
    serve: StrictBool = Field(
        default=False,
        description="this node's engine serves: the launch is ready when it is (default: the first node)",
    )
    host: Name | None = Field(default=None, description="a [hosts] entry; omitted: this machine")
    log: StrictStr | None = Field(default=None, description="the node's log file (as a launch's log)")
    container: StrictStr | None = Field(default=None, description="or a container (as a launch's container)")
    unit: StrictStr | None = Field(default=None, description="or a systemd unit (as a launch's unit)")
    pod: StrictStr | None = Field(default=None, description="or a Kubernetes pod (as a launch's pod)")
    selector: StrictStr | None = Field(default=None, description="or a label selector (as a launch's)")
    namespace: StrictStr | None = Field(default=None, description="the selector's namespace")
    context: StrictStr | None = Field(default=None, description="the kubeconfig context of pod or selector")
    kubeconfig: AbsPath | None = Field(default=None, description="the kubeconfig file of pod or selector")
    process: Annotated[StrictStr, AfterValidator(check_pattern)] | None = Field(
        default=None, description="`pgrep -f` pattern of the node's server process"
    )
    pid_file: AbsPath | None = Field(default=None, description="file holding the node's server pid")
    health_url: Annotated[StrictStr, AfterValidator(partial(check_http_url, secret=False))] | None = Field(
        default=None, description="the node's health endpoint (as a launch's health_url)"
    )


class LaunchConfig(_Model):
    """[launches.NAME]: one server launch to follow (the NAME is its `launch` label)."""

    model_config = ConfigDict(
        **_Model.model_config,
        # exactly one of the keys that name what to follow (`launch_kind`), or nodes, as editors can check it
        json_schema_extra={
            "oneOf": [{"required": [key]} for key in (*(str(k.config_key) for k in _CONFIG_KINDS), "nodes")]
        },
    )

    host: Name | None = Field(
        default=None, description="a [hosts] entry; omitted: the log is a file on this machine"
    )
    log: StrictStr | None = Field(
        default=None,
        description="the log file: absolute on this machine; on a host absolute, or relative to the home "
        "directory (exactly one of log, container, unit, pod)",
    )
    container: StrictStr | None = Field(
        default=None,
        description="a container's name or id: its log and state through the host's runtime (docker, podman); "
        "without host, the local Docker daemon (DOCKER_HOST honoured)",
    )
    unit: StrictStr | None = Field(
        default=None,
        description="a systemd unit whose output goes to journald (sglang.service), or identifier=NAME for "
        "entries of that SYSLOG_IDENTIFIER",
    )
    pod: StrictStr | None = Field(
        default=None,
        description="a Kubernetes pod: [CONTEXT/]NAMESPACE/POD[/CONTAINER] (a context comes with the container)",
    )
    selector: StrictStr | None = Field(
        default=None,
        description="instead of pod: a label selector (app=vllm) whose newest pod of namespace is followed, each new "
        "pod a new incarnation; container then names the pod's container",
    )
    namespace: StrictStr | None = Field(default=None, description="the selector's Kubernetes namespace")
    context: StrictStr | None = Field(
        default=None, description="the kubeconfig context of pod or selector (default: the current one)"
    )
    kubeconfig: AbsPath | None = Field(
        default=None,
        description="the kubeconfig file of pod or selector (default: KUBECONFIG, ~/.kube/config, "
        "else the pod's service account)",
    )
    engine: StrictStr = Field(
        default="auto",
        description="engine profile: " + ", ".join(ENGINE_CHOICES) + ", or the `name` of a profile in "
        "profiles; auto: detected from the first lines",
    )
    profiles: tuple[AbsPath, ...] = Field(
        default=(),
        description="user profile files (TOML, docs/profiles.md): rules added to an engine (extends), or a new "
        "engine (name) that engine names or the log's first lines show",
    )
    process: Annotated[StrictStr, AfterValidator(check_pattern)] | None = Field(
        default=None,
        description="`pgrep -f` pattern of the server process: gone without a traceback = crashed (killed)",
    )
    pid_file: AbsPath | None = Field(
        default=None, description="file holding the server's pid (instead of process)"
    )
    health_url: Annotated[StrictStr, AfterValidator(partial(check_http_url, secret=False))] | None = Field(
        default=None, description="health endpoint: 200 after the weights are loaded counts as ready"
    )
    stall_after: Duration = Field(
        default=DEFAULT_STALL_AFTER, description="no progress for this long while starting = stalled"
    )
    hang_after: Duration | None = Field(
        default=None,
        description="once ready: requests running or waiting with no token generated for this long = stalled "
        "(a serving hang, from the engine's serving lines); default: [daemon] hang_after",
    )
    gpu: StrictBool = Field(
        default=False,
        description="sample the GPU memory of the launch's processes (process, and their children; with "
        "pid_file or neither, every GPU process of the host) with nvidia-smi on its host: memory "
        "still filling counts as progress",
    )
    gpu_interval: Duration = Field(
        default=DEFAULT_GPU_INTERVAL, description="seconds between two GPU memory samples of the host"
    )
    deadlines: Deadlines = Field(default=Deadlines.model_validate({}), description="per-phase deadlines")
    learn_deadlines: StrictBool = Field(
        default=True,
        description="a phase longer than learned_factor x the p95 of its past durations (and than its "
        "deadline) is stalled, once the launch has history",
    )
    learned_factor: Annotated[
        float, _within(1.0, 100.0, "{} is out of range: give a factor from 1 to 100")
    ] = Field(default=LEARN_FACTOR, description="how many times its usual p95 a phase may take (1 to 100)")
    notify: tuple[Name, ...] = Field(default=(), description="[notifiers] entries told of each verdict")
    labels: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_labels)] = Field(
        default_factory=dict,
        description="the launch's own labels: on watchdog_launch_info, in /status and alerts",
    )
    command: tuple[StrictStr, ...] | None = Field(
        default=None,
        description="launch mode: the server's command line, each word as given (never read by a shell); "
        "`watchdog start NAME` starts it detached on host with its output appended to log and its pid in "
        "LOG.pid; for a container, the run's options, image and command (RUNTIME run -d --name CONTAINER "
        "...) (docs/launch-mode.md); needs log or container",
    )
    cwd: StrictStr | None = Field(
        default=None,
        description="the command's working directory on its host (default: the login directory; a container's: "
        "its image's)",
    )
    env: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_env)] = Field(
        default_factory=dict, description="variables added to the command's environment"
    )
    kill_on_crash: StrictBool = Field(
        default=False,
        description="on a crash verdict of a run the daemon started, end its whole process group (SIGTERM, "
        "then SIGKILL after stop_grace) so that its GPUs are freed at once",
    )
    stop_grace: Duration = Field(
        default=DEFAULT_STOP_GRACE,
        description="seconds from SIGTERM to SIGKILL when the command's process group is ended (stop, "
        "kill_on_crash, replace)",
    )
    start: Literal["manual", "on_boot"] = Field(
        default="manual",
        description='"manual": started only by `watchdog start` (or POST /launches/NAME/start); "on_boot": also '
        "by the daemon when it starts and the command does not run",
    )
    nodes: tuple[NodeConfig, ...] = Field(
        default=(),
        description="a multi-node launch: one source per node (instead of the launch's host, log, container, "
        "unit, pod or selector, process, pid_file and health_url); one lifecycle, ready when the serving node "
        "is, crashed when any node crashes (docs/nodes.md)",
    )

    def node_names(self) -> tuple[str, ...]:
        """Each node's name: its `name`, else its host's, else node<i> (a host named twice: host-<i>)."""
        hosts = [node.host for node in self.nodes]
        out = []
        for index, node in enumerate(self.nodes):
            if node.name is not None:
                out.append(node.name)
            elif node.host is not None:
                out.append(node.host if hosts.count(node.host) == 1 else f"{node.host}-{index}")
            else:
                out.append(f"node{index}")
        return tuple(out)

    def serving_node(self) -> int:
        """The index of the node whose engine serves: the one with serve = true, else the first."""
        return next((i for i, node in enumerate(self.nodes) if node.serve), 0)


NotifierURL = Annotated[
    SecretStr,
    _secret_schema(
        "the service's URL (a secret): the URL, env:NAME or file:/path; for apprise an apprise URL (slack://...)"
    ),
]
AlertKindName = Annotated[StrictStr, _one_of("alert kind", ALERT_KINDS)]


class NotifierConfig(_Model):
    """[notifiers.NAME]: where alerts are sent, which ones, and how often."""

    kind: Annotated[StrictStr, _one_of("kind", NOTIFIER_KINDS)] = Field(
        description="the service: " + ", ".join(NOTIFIER_KINDS) + " (docs/notifiers.md)",
        json_schema_extra={"enum": list(NOTIFIER_KINDS)},
    )
    url: NotifierURL | None = Field(default=None, description="the service's URL (a secret); or urls")
    urls: tuple[NotifierURL, ...] | None = Field(
        default=None, description="several URLs (secrets): each gets every alert (e.g. Alertmanager replicas)"
    )
    on: tuple[AlertKindName, ...] | None = Field(
        default=None,
        description="the alert kinds sent: "
        + ", ".join(ALERT_KINDS)
        + "; default: all but ready ("
        + ", ".join(DEFAULT_ALERT_ON)
        + "), and all for console",
        json_schema_extra={"items": {"enum": list(ALERT_KINDS)}},
    )
    min_severity: Annotated[StrictStr, _one_of("severity", SEVERITIES)] = Field(
        default="info",
        description="only alerts this severe or more: info (ready, replaced), warning (stalled), "
        "error (unreachable), critical (crashed); a resolution goes with its problem",
        json_schema_extra={"enum": list(SEVERITIES)},
    )
    rate_limit: Annotated[
        StrictInt, _within(1, 10_000, "{} is out of range: give alerts per minute from 1 to 10000")
    ] = Field(
        default=DEFAULT_RATE_LIMIT,
        description="alerts per minute at most; more wait their turn in the outbox (none is dropped)",
    )
    remind_every: Duration | None = Field(
        default=None, description="say a crash or stall again this often while it stays unresolved (opt-in)"
    )
    timeout: Duration = Field(default=10.0, description="seconds one request may take")
    # the options of some services (docs/notifiers.md)
    channel: StrictStr | None = Field(default=None, description="mattermost: the channel to post in")
    username: StrictStr | None = Field(default=None, description="mattermost: the name shown")
    icon_url: StrictStr | None = Field(default=None, description="mattermost: the icon shown")
    chat_id: StrictStr | None = Field(default=None, description="telegram: the chat (required)")
    message_thread_id: StrictStr | None = Field(default=None, description="telegram: a forum topic")
    token: Secret | None = Field(default=None, description="ntfy: an access token (a secret)")
    priority: StrictStr | None = Field(default=None, description="ntfy: overrides the priority by kind")
    routing_key: Secret | None = Field(
        default=None, description="pagerduty: the integration's routing key (a secret; required)"
    )
    template: StrictStr | dict[StrictStr, Any] | list[Any] | None = Field(
        default=None,
        description="webhook: the body: a table (stays JSON) or a string, with {field} placeholders "
        "(docs/notifiers.md)",
    )
    content_type: StrictStr | None = Field(default=None, description="webhook: the body's content type")
    runbook_url: Annotated[StrictStr, AfterValidator(_check_runbook_url)] | None = Field(
        default=None,
        description="alertmanager: where the alerts' runbook_url annotation points, each at #<alertname> "
        "(default: the project's docs/runbooks.md)",
    )

    def alert_kinds(self) -> tuple[str, ...]:
        """The alert kinds it says: `on` (or its kind's default) as severe as `min_severity` or more; a
        resolution goes with the problem it ends (sent only for problems that were)."""
        kinds = (
            self.on if self.on is not None else ALERT_KINDS if self.kind == "console" else DEFAULT_ALERT_ON
        )
        floor = SEVERITIES.index(self.min_severity)
        return tuple(k for k in kinds if k == "resolved" or SEVERITIES.index(SEVERITY[AlertKind(k)]) >= floor)

    def secret_urls(self) -> tuple[str, ...]:
        """The URLs in clear: to post to, never to print."""
        urls = (self.url,) if self.url is not None else (self.urls or ())
        return tuple(url.get_secret_value() for url in urls)

    def options(self) -> dict[str, Any]:
        """The service options that are set, secrets in clear: to send with, never to print."""
        out: dict[str, Any] = {}
        for key in _OPTION_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        return out


# The service options a notifier table may hold: those some kind reads besides its URL.
_OPTION_KEYS = sorted(
    set().union(*(required | optional for required, optional in notifier_kinds.OPTIONS.values()))
)


def _check_notifier(name: str, notifier: NotifierConfig) -> None:
    where = ("notifiers", name)
    kind = notifier.kind
    if kind == "console":
        if notifier.url is not None or notifier.urls is not None:
            raise _KeyProblem(key_path((*where, "url")), "a console notifier takes no URL")
    elif (notifier.url is None) == (notifier.urls is None):
        raise _KeyProblem(key_path((*where, "url")), f'a {kind} notifier needs url = "..." or urls = [...]')
    if notifier.urls == ():
        raise _KeyProblem(key_path((*where, "urls")), "is empty: give at least one URL")
    urls: list[tuple[Loc, str]] = []
    if notifier.url is not None:
        urls.append(((*where, "url"), notifier.url.get_secret_value()))
    for index, secret in enumerate(notifier.urls or ()):
        urls.append(((*where, "urls", index), secret.get_secret_value()))
    for loc, url in urls:
        if kind == "apprise":
            if not _APPRISE_URL.match(url):
                raise _KeyProblem(key_path(loc), "is not an apprise URL: give scheme://..., e.g. slack://...")
            continue
        try:
            check_http_url(url, secret=True)  # its messages show scheme://host only
        except ValueError as exc:
            raise _KeyProblem(key_path(loc), str(exc)) from None
    required, optional = notifier_kinds.OPTIONS.get(kind, (frozenset(), frozenset()))
    options = notifier.options()
    for key in sorted(required - options.keys()):
        raise _KeyProblem(key_path((*where, key)), f"a {kind} notifier needs {key}")
    for key in sorted(options.keys() - required - optional):
        allowed = ", ".join(sorted(required | optional)) or "none"
        raise _KeyProblem(key_path((*where, key)), f"is not an option of {kind} (its options: {allowed})")
    if kind == "webhook" and notifier.template is not None:
        try:
            check_template(notifier.template)
        except ValueError as exc:
            raise _KeyProblem(key_path((*where, "template")), str(exc)) from None
    if notifier.on is not None and len(set(notifier.on)) != len(notifier.on):
        raise _KeyProblem(key_path((*where, "on")), "names an alert kind twice")


_APPRISE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")


class Config(_Model):
    """The whole config file: [daemon], [hosts.*], [launches.*], [notifiers.*]."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        title="watchdog config",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    daemon: DaemonConfig = Field(default=DaemonConfig.model_validate({}), description="the daemon process")
    hosts: dict[StrictStr, HostConfig] = Field(default_factory=dict, description="SSH hosts by name")
    launches: dict[StrictStr, LaunchConfig] = Field(default_factory=dict, description="launches by name")
    notifiers: dict[StrictStr, NotifierConfig] = Field(default_factory=dict, description="notifiers by name")

    # Where each secret came from ("env:NAME", "file:/path"), by key location: shown by `redacted`.
    _secret_sources: dict[Loc, str] = PrivateAttr(default_factory=dict)
    # The keys the environment set (config/environment.py), by location: the variable that set each.
    _environment: dict[Loc, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def check_references(self) -> Config:
        """The rules that span keys and tables: names, pairs of keys, references between tables."""
        for section in ("hosts", "launches", "notifiers"):
            for name in getattr(self, section):
                if not _NAME.match(name):
                    raise _KeyProblem(
                        key_path((section, name)), f"{name!r} is not a valid name: use {_NAMES}"
                    )
        _check_daemon(self.daemon)
        _check_hosts(self.hosts)
        _check_launches(self)
        for name, notifier in self.notifiers.items():
            _check_notifier(name, notifier)
        return self

    def launch_spec(self, name: str) -> LaunchSpec:
        """The follower spec of launch `name` (see `launch_spec`)."""
        return launch_spec(self, name)


def _check_daemon(daemon: DaemonConfig) -> None:
    if (daemon.tls_cert is None) != (daemon.tls_key is None):
        missing = "tls_key" if daemon.tls_key is None else "tls_cert"
        raise _KeyProblem(f"daemon.{missing}", "tls_cert and tls_key go together: give both or neither")
    if (daemon.basic_auth_user is None) != (daemon.basic_auth_password is None):
        missing = "basic_auth_password" if daemon.basic_auth_password is None else "basic_auth_user"
        raise _KeyProblem(
            f"daemon.{missing}", "basic_auth_user and basic_auth_password go together: give both"
        )
    if daemon.listen_is_loopback or daemon.insecure_public:
        return
    if daemon.tls_cert is None or daemon.basic_auth_user is None:
        raise _KeyProblem(
            "daemon.listen",
            f"{daemon.listen!r} is reachable from other machines: set tls_cert, tls_key, basic_auth_user and "
            "basic_auth_password, or insecure_public = true (or listen on 127.0.0.1)",
        )


def _check_hosts(hosts: Mapping[str, HostConfig]) -> None:
    for name, host in hosts.items():
        hop, seen = host.jump_host, [name]
        while hop is not None:
            if hop not in hosts:
                raise _KeyProblem(
                    key_path(("hosts", seen[-1], "jump_host")),
                    f"unknown host {hop!r}; {_defined('hosts', hosts)}",
                )
            if hop in seen:
                raise _KeyProblem(
                    key_path(("hosts", name, "jump_host")),
                    f"jump hosts form a loop: {' -> '.join([*seen, hop])}",
                )
            seen.append(hop)
            hop = hosts[hop].jump_host


def _check_engine(launch: LaunchConfig, where: tuple[str, str]) -> None:
    # the user profiles are read (a broken one names its file and key), and the engine is one of them or bundled
    names = []
    for index, path in enumerate(launch.profiles):
        try:
            names.append(load_profile_file(Path(path)).name)
        except ConfigError as exc:
            raise _KeyProblem(key_path((*where, "profiles", index)), str(exc)) from None
    if launch.engine not in (*ENGINE_CHOICES, *names):
        allowed = ", ".join((*ENGINE_CHOICES, *dict.fromkeys(names)))
        raise _KeyProblem(
            key_path((*where, "engine")),
            f"unknown engine {launch.engine!r}; allowed: {allowed} (a new engine's profile goes in profiles)",
        )


def _check_nodes(
    config: Config, launch: LaunchConfig, where: Loc, files: dict[tuple[str | None, str], str]
) -> None:
    # a multi-node launch: its sources are its nodes', none of its own; each node's checked as a launch's
    for key in NODE_KEYS:
        if getattr(launch, key) is not None:
            raise _KeyProblem(
                key_path((*where, key)),
                "is not allowed with nodes: a multi-node launch gives each node its own (nodes = [{ host = ..., "
                "log = ... }, ...])",
            )
    names = launch.node_names()
    for index, node in enumerate(launch.nodes):
        at_node = (*where, "nodes", index)
        if names.index(names[index]) != index:
            raise _KeyProblem(
                key_path((*at_node, "name")), f"{names[index]!r} names two nodes: give each its own name"
            )
        _check_source(config, node, at_node, files, f"{key_path(where)}.nodes[{index}]")
    if sum(node.serve for node in launch.nodes) > 1:
        second = [i for i, node in enumerate(launch.nodes) if node.serve][1]
        raise _KeyProblem(key_path((*where, "nodes", second, "serve")), "only one node serves")


def _check_source(
    config: Config,
    launch: LaunchConfig | NodeConfig,
    where: Loc,
    files: dict[tuple[str | None, str], str],
    label: str,
) -> None:
    # what one source names (a launch's, or a node's): its host, kind, log or name, and process
    if launch.host is not None and launch.host not in config.hosts:
        raise _KeyProblem(
            key_path((*where, "host")),
            f"unknown host {launch.host!r}; {_defined('hosts', config.hosts)}",
        )
    kind, named = launch_kind(config, launch, where)
    at = key_path((*where, KINDS[kind].config_key or "log"))
    if kind == FILE:
        key = _check_log(launch, named, at)
        if key in files:
            raise _KeyProblem(at, f"the same file as {files[key]}.log: follow each log once")
        files[key] = label
    else:
        _check_named(launch, kind, named, at)
    for pod_key, only in (("namespace", "a selector"), ("context", "a pod"), ("kubeconfig", "a pod")):
        if getattr(launch, pod_key) is not None and (
            kind != "k8s" or (pod_key == "namespace" and launch.selector is None)
        ):
            raise _KeyProblem(key_path((*where, pod_key)), f"is for {only} (pod = ... or selector = ...)")
    try:
        check_process(None, launch.process, launch.pid_file, names=("pid", "process", "pid_file"))
    except ValueError as exc:
        raise _KeyProblem(key_path((*where, "pid_file")), str(exc)) from None


def _check_launches(config: Config) -> None:
    files: dict[tuple[str | None, str], str] = {}  # each log file followed, and by which launch or node
    for name, launch in config.launches.items():
        where = ("launches", name)
        if launch.nodes:
            _check_nodes(config, launch, where, files)
        else:
            _check_source(config, launch, where, files, key_path(where))
        _check_engine(launch, where)
        for index, notifier in enumerate(launch.notify):
            if notifier not in config.notifiers:
                raise _KeyProblem(
                    key_path((*where, "notify", index)),
                    f"unknown notifier {notifier!r}; {_defined('notifiers', config.notifiers)}",
                )
        if len(set(launch.notify)) != len(launch.notify):
            raise _KeyProblem(key_path((*where, "notify")), "names a notifier twice")
        if launch.nodes and launch.command is not None:
            raise _KeyProblem(
                key_path((*where, "command")),
                "launch mode starts one source: not a launch with nodes = [...]",
            )
        _check_command(launch, "" if launch.nodes else launch_kind(config, launch, where)[0], where)


def _check_command(launch: LaunchConfig, kind: str, where: tuple[str, str]) -> None:
    # launch mode: a command for a log file, and the keys that go with it only with it
    if launch.command is None:
        given = {
            "cwd": launch.cwd is not None,
            "env": bool(launch.env),
            "kill_on_crash": launch.kill_on_crash,
        }
        given["start"] = launch.start != "manual"
        for key in (k for k, set_ in given.items() if set_):
            raise _KeyProblem(key_path((*where, key)), "is for a launch that has a command = [...]")
        return
    at = key_path((*where, "command"))
    if kind not in (FILE, "docker", "podman"):
        raise _KeyProblem(at, "is for a launch whose output goes to a log file (log = ...) or a container")
    if not launch.command or not launch.command[0].strip():
        raise _KeyProblem(at, 'is empty: give the server\'s command line, e.g. ["python3", "-m", ...]')
    if kind == FILE and launch.command[0].startswith("-"):  # a container's run options come first
        raise _KeyProblem(f"{at}[0]", f"{launch.command[0]!r} is not a command (it starts with '-')")
    for index, word in enumerate(launch.command):
        if "\0" in word:
            raise _KeyProblem(f"{at}[{index}]", "may not contain NUL characters")
    if launch.cwd is not None and (not launch.cwd.strip() or "\0" in launch.cwd):
        raise _KeyProblem(key_path((*where, "cwd")), f"{launch.cwd!r} is not a directory")
    for key in ("process", "pid_file"):
        if getattr(launch, key) is not None:
            raise _KeyProblem(
                key_path((*where, key)), f"a launch with a command records its pid in LOG.pid: remove {key}"
            )


def _check_log(launch: LaunchConfig | NodeConfig, log: str, at: str) -> tuple[str | None, str]:
    # a log file's path; what tells it from another launch's (the same file is followed once)
    if not log.strip():
        raise _KeyProblem(at, "is empty: give the path of the server's log file")
    if "\0" in log or "\n" in log:
        raise _KeyProblem(at, "may not contain NUL or newline characters")
    if launch.host is None and not log.startswith("/"):
        raise _KeyProblem(
            at, f"{log!r} is relative: a log on this machine needs an absolute path (or set host = ...)"
        )
    if launch.host is not None and (log.endswith("/") or log in ("~", ".")):
        raise _KeyProblem(at, f"{log!r} names a directory: give the log file's path")
    return launch.host, posixpath.normpath(remote_relative(log))


def _pod_target(launch: LaunchConfig | NodeConfig) -> Target:
    # a pod (`pod`, its context in it or in `context`) or a selector's pods, with the kubeconfig to read them by
    from watchdog.follow.sources.podref import PodRef, parse_pod_path  # noqa: PLC0415 - only for a pod

    if launch.selector is not None:
        ref = PodRef(str(launch.namespace), selector=launch.selector, container=launch.container)
        context = launch.context
    else:
        parsed = parse_target(f"k8s://{launch.pod}")
        ref, context = parse_pod_path(parsed.path), launch.context or parsed.context
    path = dataclasses.replace(ref, kubeconfig=launch.kubeconfig).path
    return Target(None, None, None, path, kind="k8s", context=context)


def _check_named(launch: LaunchConfig | NodeConfig, kind: str, name: str, at: str) -> None:
    # a container, unit or pod: a name passed as one argument, never through a shell unquoted
    if not name.strip() or name.startswith("-") or "\0" in name or "\n" in name:
        raise _KeyProblem(at, f"{name!r} is not a {KINDS[kind].noun} name")
    if not KINDS[kind].remote and launch.host is not None:
        raise _KeyProblem(at, f"a {KINDS[kind].noun} is not read over SSH: remove host")
    if kind == "k8s":
        if launch.selector is not None and launch.namespace is None:
            raise _KeyProblem(at.rpartition(".")[0] + ".namespace", "is required with selector")
        try:
            _pod_target(launch)
        except UsageError as exc:
            raise _KeyProblem(at, str(exc)) from None


def launch_kind(config: Config, launch: LaunchConfig | NodeConfig, where: Loc = ()) -> tuple[str, str]:
    """The source kind of a launch or of one of its nodes (a key of `KINDS`) and the name it follows there; a container's kind is its
    host's runtime (docker without a host).

    Raises:
        _KeyProblem: not exactly one of the kind keys (log, container, unit, pod) is set.
    """
    named = [(k, getattr(launch, str(k.config_key))) for k in _CONFIG_KINDS]
    named = [(k, value) for k, value in named if value is not None]
    if launch.selector is not None:  # a selector's pods: `container` names their container
        named = [(k, v) for k, v in named if k.config_key != "container"] + [(KINDS["k8s"], launch.selector)]

    keys = ", ".join(str(k.config_key) for k in _CONFIG_KINDS)
    if not named:
        raise _KeyProblem(
            key_path((*where, "log")), f"is required: one of {keys} (or selector) names what to follow"
        )
    if len(named) > 1:
        first, second = (str(k.config_key) for k, _ in named[:2])
        raise _KeyProblem(key_path((*where, second)), f"only one of {keys} may be given ({first} is too)")
    kind, name = named[0]
    if kind.name == "docker" and launch.host is not None and launch.host in config.hosts:
        return config.hosts[launch.host].runtime, name
    return kind.name, name


def _defined(section: str, names: Mapping[str, object]) -> str:
    if not names:
        return f"there is no [{section}.NAME] table: define one"
    return f"defined: {', '.join(sorted(names))}"


def key_path(loc: Loc | list[str | int]) -> str:
    """("launches", "kimi-ep", "notify", 0) -> launches.kimi-ep.notify[0]; odd names quoted as in TOML."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.match(part) else json.dumps(part)
        out += f".{text}" if out else text
    return out


def launch_spec(config: Config, name: str) -> LaunchSpec:
    """The follower spec of one configured launch.

    `notify` and `labels` stay on `config.launches[name]` for the daemon. The pid file is read on the
    launch's host at each process check (a restarted server's new pid is followed). Of a multi-node launch,
    the serving node's spec under the launch's name (its nodes' are `node_specs`').

    Args:
        config: a validated config.
        name: a key of `config.launches`.

    Returns:
        The spec: the target (the host's address, user and port; the log path), engine (None for auto),
        process pattern, health URL, GPU sampling and stall time.

    Raises:
        KeyError: there is no such launch.
    """
    launch = config.launches[name]
    if launch.nodes:
        return dataclasses.replace(node_specs(config, name)[launch.serving_node()][2], name=name)
    return _source_spec(config, name, launch, launch)


def node_specs(config: Config, name: str) -> tuple[tuple[str, str, LaunchSpec], ...]:
    """The nodes of multi-node launch `name` (empty for a launch of one source): each node's name, its
    configured host ("" for this machine) and its follower's spec, named `LAUNCH@NODE` (its checkpoint's key).

    Raises:
        KeyError: there is no such launch.
    """
    launch = config.launches[name]
    return tuple(
        (node_name, node.host or "", _source_spec(config, f"{name}@{node_name}", launch, node))
        for node_name, node in zip(launch.node_names(), launch.nodes, strict=True)
    )


def _source_spec(
    config: Config, name: str, launch: LaunchConfig, source: LaunchConfig | NodeConfig
) -> LaunchSpec:
    # the spec of one source: the launch's own, or one of its nodes' (the rest of the settings the launch's)
    kind, name_of = launch_kind(config, source)
    if kind == "k8s":
        target = _pod_target(source)
    elif source.host is None:
        target = Target(host=None, user=None, port=None, path=name_of, kind=kind)
    else:
        host = config.hosts[source.host]
        target = Target(
            host=host.address or source.host,
            user=host.user,
            port=host.port,
            path=remote_relative(name_of) if kind == FILE else name_of,
            kind=kind,
        )
    pid_file = source.pid_file
    if launch.command is not None and kind == FILE:
        pid_file = pid_file_of(target.path)  # the pid `watchdog start` records: the run's process evidence
    return LaunchSpec(
        name=name,
        target=target,
        engine=None if launch.engine == "auto" else launch.engine,
        profiles=tuple(load_profile_file(Path(path)) for path in launch.profiles),
        process=source.process,
        pid_file=pid_file,
        health_url=source.health_url,
        gpu=launch.gpu,
        gpu_interval=launch.gpu_interval,
        stall_after=launch.stall_after,
        hang_after=config.daemon.hang_after if launch.hang_after is None else launch.hang_after,
        deadlines=tuple(launch.deadlines.by_phase().items()),
    )
