"""The daemon's config file: bad files are refused naming file and key, good ones load, secrets stay masked."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from watchdog.alerts import notifiers
from watchdog.cli.checkconfig import check_config_main, config_schema_main
from watchdog.config.convert import redacted, ssh_options
from watchdog.config.loading import load_config, parse_config
from watchdog.config.models import Config, launch_spec, node_specs
from watchdog.config.reference import config_json_schema, config_reference_markdown
from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.exceptions import ConfigError
from watchdog.follow.sources.target import Target
from watchdog.profiles.loader import load_engine
from watchdog.vocabulary import EXIT_CONFIG, State, parse_duration

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "deploy" / "config.example.toml"
DOCS = ROOT / "docs" / "config.md"
EXAMPLE_ENV = {
    "WATCHDOG_TEAM_WEBHOOK": "https://hooks.example.com/services/T0/B0/team-token-1",
    "WATCHDOG_PAGERDUTY_KEY": "pd-routing-key-2",
    "WATCHDOG_MATTERMOST_WEBHOOK": "https://chat.example.com/hooks/mm-token-3",
    "WATCHDOG_TELEGRAM_BOT_URL": "https://api.telegram.org/bot123:tg-token-4",
    "WATCHDOG_APPRISE_URL": "discord://1234/apprise-token-5",
}
TOKEN = "s3cr3t-t0ken-4f9a"  # appears in every secret of these tests, so a leak is easy to find
HOOK = f"https://hooks.example.com/services/T0/B0/{TOKEN}"

GOOD = f"""
[daemon]
listen = "0.0.0.0:9469"
state_dir = "/var/lib/llm-launch-watchdog"
log_format = "console"
tls_cert = "/etc/llm-launch-watchdog/cert.pem"
tls_key = "/etc/llm-launch-watchdog/key.pem"
basic_auth_user = "prom"
basic_auth_password = "env:WD_TEST_PASSWORD"

[hosts.gpu1]
address = "10.1.230.174"
port = 2222
user = "root"
identity = "/etc/llm-launch-watchdog/id_ed25519"
known_hosts = "/etc/llm-launch-watchdog/known_hosts"
jump_host = "bastion"
max_channels = 8
stat_interval = "2s"

[hosts.bastion]
address = "bastion.example.org"

[launches.kimi-ep]
host = "gpu1"
log = "/data/logs/ep.log"
engine = "sglang"
process = "sglang.launch_server"
health_url = "http://127.0.0.1:30000/health"
stall_after = "1h30m"
deadlines = {{ loading_weights = "20m", capturing_graphs = 900 }}
notify = ["team", "stderr"]
labels = {{ team = "inference" }}

[launches.home]
host = "gpu1"
log = "~/logs/vllm.log"
pid_file = "/run/vllm.pid"

[launches.local]
log = "/var/log/llama/server.log"

[notifiers.team]
kind = "webhook"
url = "{HOOK}"

[notifiers.stderr]
kind = "console"
"""

# (the file's text, the key path the message must name, a fragment of what it must say). "{tmp}" is the
# test's temporary directory.
BAD = [
    pytest.param(
        '[daemon]\nlisen = "127.0.0.1:9469"\n',
        "daemon.lisen",
        "unknown key; allowed: listen",
        id="unknown-key",
    ),
    pytest.param("[deamon]\n", "deamon", "allowed: daemon, hosts, launches, notifiers", id="unknown-section"),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nstall_afer = "5m"\n',
        "launches.a.stall_afer",
        "unknown key",
        id="typo-in-launch",
    ),
    pytest.param(
        '[hosts.g]\nport = "22"\n', "hosts.g.port", "must be an integer, not a string", id="wrong-type"
    ),
    pytest.param(
        'hosts = { g = "10.0.0.1" }\n', "hosts.g", "must be a table, not a string", id="host-not-table"
    ),
    pytest.param("[hosts.g]\nport = -22\n", "hosts.g.port", "from 1 to 65535", id="negative-port"),
    pytest.param("[hosts.g]\nport = 70000\n", "hosts.g.port", "from 1 to 65535", id="port-too-big"),
    pytest.param(
        "[hosts.g]\nmax_channels = 0\n", "hosts.g.max_channels", "from 1 to 1000", id="max-channels-0"
    ),
    pytest.param(
        "[hosts.g]\nstat_interval = 0.01\n",
        "hosts.g.stat_interval",
        "from 0.05s to 1m",
        id="stat-interval-short",
    ),
    pytest.param('[hosts.g]\naddress = "gpu 1"\n', "hosts.g.address", "no spaces", id="bad-address"),
    pytest.param(
        '[hosts.g]\nidentity = "keys/id"\n', "hosts.g.identity", "absolute path", id="relative-identity"
    ),
    pytest.param(
        '[hosts.a]\njump_host = "b"\n[hosts.b]\njump_host = "a"\n',
        "hosts.a.jump_host",
        "loop",
        id="jump-loop",
    ),
    pytest.param(
        '[hosts.a]\njump_host = "z"\n', "hosts.a.jump_host", "unknown host 'z'", id="unknown-jump-host"
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nstall_after = "10 minutes"\n',
        "launches.a.stall_after",
        '"1h30m"',
        id="bad-duration",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nstall_after = "1h30"\n',
        "launches.a.stall_after",
        "not a duration",
        id="duration-unitless-tail",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nstall_after = 0\n',
        "launches.a.stall_after",
        "positive duration",
        id="zero-duration",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nstall_after = true\n',
        "launches.a.stall_after",
        "positive duration",
        id="bool-duration",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\ndeadlines = { loading_weights = "-5m" }\n',
        "launches.a.deadlines.loading_weights",
        "not a duration",
        id="bad-deadline",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\ndeadlines = { ready = "5m" }\n',
        "launches.a.deadlines.ready",
        "allowed: pending, starting, loading_weights, allocating_kv_cache, capturing_graphs",
        id="deadline-not-a-phase",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nengine = "sglang2"\n',
        "launches.a.engine",
        "allowed: auto, sglang, vllm, tgi, trtllm, llamacpp, ollama, generic",
        id="unknown-engine",
    ),
    pytest.param(
        '[hosts.gpu1]\n[launches.a]\nhost = "gpu9"\nlog = "/x.log"\n',
        "launches.a.host",
        "unknown host 'gpu9'; defined: gpu1",
        id="unknown-host",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nnotify = ["team"]\n',
        "launches.a.notify[0]",
        "unknown notifier 'team'",
        id="unknown-notifier",
    ),
    pytest.param(
        '[notifiers.c]\nkind = "console"\n[launches.a]\nlog = "/x.log"\nnotify = ["c", "c"]\n',
        "launches.a.notify",
        "twice",
        id="notifier-twice",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nnotify = "team"\n',
        "launches.a.notify",
        "must be an array",
        id="notify-not-list",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nnodes = [{ log = "/y.log" }]\n',
        "launches.a.log",
        "is not allowed with nodes",
        id="nodes-and-log",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log" }, { engine = "vllm" }]\n',
        "launches.a.nodes[1].engine",
        "unknown key",
        id="node-unknown-key",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log" }, { name = "n" }]\n',
        "launches.a.nodes[1].log",
        "is required",
        id="node-without-source",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log" }, { log = "/x.log" }]\n',
        "launches.a.nodes[1].log",
        "the same file as launches.a.nodes[0].log",
        id="nodes-same-file",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log", host = "gpu9" }]\n',
        "launches.a.nodes[0].host",
        "unknown host 'gpu9'",
        id="node-unknown-host",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log", name = "n" }, { log = "/y.log", name = "n" }]\n',
        "launches.a.nodes[1].name",
        "names two nodes",
        id="nodes-same-name",
    ),
    pytest.param(
        '[launches.a]\nnodes = [{ log = "/x.log", serve = true }, { log = "/y.log", serve = true }]\n',
        "launches.a.nodes[1].serve",
        "only one node serves",
        id="nodes-two-serve",
    ),
    pytest.param('[launches.a]\nengine = "vllm"\n', "launches.a.log", "is required", id="missing-log"),
    pytest.param('[launches.a]\nlog = ""\n', "launches.a.log", "is empty", id="empty-log"),
    pytest.param(
        '[launches.a]\nlog = "server.log"\n', "launches.a.log", "absolute path", id="relative-local-log"
    ),
    pytest.param(
        '[launches.a]\nlog = "/x/y.log"\n[launches.b]\nlog = "/x/./y.log"\n',
        "launches.b.log",
        "the same file as launches.a.log",
        id="duplicate-log",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nprocess = "sglang"\npid_file = "/run/s.pid"\n',
        "launches.a.pid_file",
        "not both",
        id="process-and-pid-file",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nprocess = "  "\n', "launches.a.process", "is empty", id="empty-process"
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nhealth_url = "localhost:30000/health"\n',
        "launches.a.health_url",
        "http://host[:port]/path",
        id="bad-health-url",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nlabels = { host = "x" }\n',
        "launches.a.labels",
        "reserved",
        id="reserved-label",
    ),
    pytest.param(
        '[launches.a]\nlog = "/x.log"\nlabels = { gpus = 8 }\n',
        "launches.a.labels.gpus",
        "must be a string",
        id="label-not-string",
    ),
    pytest.param(
        '[launches."a b"]\nlog = "/x.log"\n', 'launches."a b"', "not a valid name", id="bad-launch-name"
    ),
    pytest.param(
        '[notifiers.t]\nkind = "hipchat"\nurl = "https://x.example/y"\n',
        "notifiers.t.kind",
        "unknown kind 'hipchat'; allowed: slack, discord,",
        id="unsupported-kind",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "pagerduty"\nurl = "https://events.pagerduty.com"\n',
        "notifiers.t.routing_key",
        "a pagerduty notifier needs routing_key",
        id="pagerduty-without-routing-key",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "slack"\nurl = "https://x.example/y"\nchat_id = "1"\n',
        "notifiers.t.chat_id",
        "is not an option of slack",
        id="option-of-another-service",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "slack"\nurl = "https://x.example/y"\non = ["crashed", "exploded"]\n',
        "notifiers.t.on[1]",
        "unknown alert kind 'exploded'",
        id="unknown-alert-kind",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "slack"\nurl = "https://x.example/y"\nrate_limit = 0\n',
        "notifiers.t.rate_limit",
        "give alerts per minute from 1 to 10000",
        id="rate-limit-zero",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurl = "https://x.example/y"\ntemplate = "{secret.__class__}"\n',
        "notifiers.t.template",
        "not a plain name",
        id="webhook-template-field",
    ),
    pytest.param('[daemon]\nshard = "3/3"\n', "daemon.shard", "the last of 3 is", id="shard-out-of-range"),
    pytest.param(
        '[notifiers.t]\nkind = "apprise"\nurl = "not a url"\n',
        "notifiers.t.url",
        "is not an apprise URL",
        id="apprise-url",
    ),
    pytest.param('[notifiers.t]\nkind = "webhook"\n', "notifiers.t.url", "url = ", id="webhook-without-url"),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurls = []\n',
        "notifiers.t.urls",
        "is empty",
        id="webhook-empty-urls",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "console"\nurl = "https://x.example/y"\n',
        "notifiers.t.url",
        "takes no URL",
        id="console-with-url",
    ),
    pytest.param(
        f'[notifiers.t]\nkind = "webhook"\nurl = "ftp://hooks.example.com/{TOKEN}"\n',
        "notifiers.t.url",
        "unsupported scheme 'ftp'",
        id="bad-url-scheme",
    ),
    pytest.param(
        f'[notifiers.t]\nkind = "webhook"\nurls = ["https://a.example/x", "https://hooks.example.com:99999/{TOKEN}"]\n',
        "notifiers.t.urls[1]",
        "invalid port",
        id="bad-url-port",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurl = "env:WD_TEST_UNSET_VARIABLE"\n',
        "notifiers.t.url",
        "environment variable WD_TEST_UNSET_VARIABLE is not set",
        id="missing-env-secret",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurl = "env:WD-BAD"\n',
        "notifiers.t.url",
        "env:NAME",
        id="bad-env-name",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurls = ["https://a.example/x", "file:{tmp}/no-such-secret"]\n',
        "notifiers.t.urls[1]",
        "No such file or directory",
        id="missing-file-secret",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurl = "file:{tmp}"\n',
        "notifiers.t.url",
        "a directory",
        id="unreadable-file-secret",
    ),
    pytest.param(
        '[notifiers.t]\nkind = "webhook"\nurl = "file:secret.txt"\n',
        "notifiers.t.url",
        "absolute",
        id="relative-file-secret",
    ),
    pytest.param(
        '[daemon]\nlisten = "127.0.0.1"\n', "daemon.listen", '"host:port"', id="listen-without-port"
    ),
    pytest.param(
        '[daemon]\nlisten = "::1:9469"\n', "daemon.listen", "in brackets", id="listen-ipv6-unbracketed"
    ),
    pytest.param(
        '[daemon]\nlisten = "127.0.0.1:99999"\n', "daemon.listen", "out of range", id="listen-port-range"
    ),
    pytest.param(
        '[daemon]\nlisten = "0.0.0.0:9469"\n',
        "daemon.listen",
        "tls_cert, tls_key, basic_auth_user and basic_auth_password, or insecure_public = true",
        id="public-listen-without-auth",
    ),
    pytest.param(
        '[daemon]\nlisten = "10.0.0.5:9469"\nbasic_auth_user = "u"\nbasic_auth_password = "p"\n',
        "daemon.listen",
        "reachable from other machines",
        id="public-listen-auth-without-tls",
    ),
    pytest.param(
        '[daemon]\ntls_cert = "/etc/c.pem"\n', "daemon.tls_key", "go together", id="cert-without-key"
    ),
    pytest.param(
        '[daemon]\nbasic_auth_user = "u"\n',
        "daemon.basic_auth_password",
        "go together",
        id="user-without-password",
    ),
    pytest.param(
        '[daemon]\nlog_format = "text"\n', "daemon.log_format", "allowed: json, console", id="bad-log-format"
    ),
    pytest.param(
        '[daemon]\nevent_loop = "trio"\n',
        "daemon.event_loop",
        "allowed: asyncio, uvloop",
        id="bad-event-loop",
    ),
    pytest.param(
        '[daemon]\nstate_dir = "state"\n', "daemon.state_dir", "absolute path", id="relative-state-dir"
    ),
    pytest.param(
        '[daemon]\ninsecure_public = "yes"\n', "daemon.insecure_public", "true or false", id="string-bool"
    ),
]


def _write(tmp_path: Path, text: str, name: str = "watchdog.toml") -> Path:
    path = tmp_path / name
    path.write_text(text.replace("{tmp}", str(tmp_path)), encoding="utf-8")
    return path


@pytest.fixture
def good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid config using every section, with a password from the environment."""
    monkeypatch.setenv("WD_TEST_PASSWORD", f"pw-{TOKEN}")
    return _write(tmp_path, GOOD)


@pytest.mark.parametrize(("text", "key", "fragment"), BAD)
def test_bad_config_names_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: str, fragment: str
) -> None:
    """Each kind of bad config is a ConfigError naming the file, the key path and what is allowed."""
    monkeypatch.delenv("WD_TEST_UNSET_VARIABLE", raising=False)
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert caught.value.path == str(path)
    assert caught.value.key == key
    assert message.startswith(f"{path}: {key}: ")
    assert fragment in message
    assert TOKEN not in message


def test_uvloop_asked_for_where_it_is_not_installed_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`event_loop = "uvloop"` on a host without uvloop names the key and how to install it (the daemon would
    otherwise fail inside anyio at its start); "asyncio" there is fine."""
    import importlib.util  # noqa: PLC0415

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else find_spec(name, *a)
    )
    path = _write(tmp_path, '[daemon]\nevent_loop = "uvloop"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "daemon.event_loop"
    assert "uvloop is not installed here" in str(caught.value)
    assert "llm-launch-watchdog[fast]" in str(caught.value)
    assert load_config(_write(tmp_path, '[daemon]\nevent_loop = "asyncio"\n')).daemon.event_loop == "asyncio"


@pytest.mark.parametrize(("text", "key", "fragment"), BAD)
def test_check_config_exits_78(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    key: str,
    fragment: str,
) -> None:
    """`check-config` on a bad file exits 78 with one message naming the file and key, and no traceback."""
    monkeypatch.delenv("WD_TEST_UNSET_VARIABLE", raising=False)
    path = _write(tmp_path, text)
    assert check_config_main(path) == EXIT_CONFIG
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"watchdog: configuration error: {path}: {key}: ")
    assert "Traceback" not in err
    assert TOKEN not in err


def test_invalid_toml_names_line(tmp_path: Path) -> None:
    """A TOML syntax error names the file and the line and column of the mistake."""
    path = _write(tmp_path, '[daemon]\nlisten = "127.0.0.1:9469"\nstate_dir = \n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: invalid TOML: ")
    assert "line 3" in str(caught.value)


def _binary(tmp_path: Path) -> Path:
    path = tmp_path / "binary.toml"
    path.write_bytes(b'[daemon]\nlisten = "\xff\xfe"\n')
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        pytest.param(lambda p: p / "missing.toml", "No such file or directory", id="missing"),
        pytest.param(lambda p: p, "a directory", id="directory"),
        pytest.param(_binary, "not UTF-8", id="not-utf8"),
    ],
)
def test_unreadable_config_file(tmp_path: Path, make: Callable[[Path], Path], fragment: str) -> None:
    """A config file that is missing, a directory or not text is a ConfigError naming it."""
    path = make(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert fragment in str(caught.value)


def test_several_problems_are_all_listed(tmp_path: Path) -> None:
    """When a file has several problems the message gives the first and lists the others."""
    path = _write(tmp_path, '[hosts.b]\nport = "22"\n[launches.a]\nengine = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "hosts.b.port"
    # (a launch that names nothing to follow is said once the types are right: `log` is one of several keys)
    assert "also: launches.a.engine: must be a string" in str(caught.value)


def test_good_config_loads_and_round_trips(good: Path) -> None:
    """A valid file loads with its values resolved, and its dump validates back into an equal config."""
    config = load_config(good)
    assert config.daemon.listen_host == "0.0.0.0"
    assert config.daemon.listen_port == 9469
    assert not config.daemon.listen_is_loopback
    assert config.daemon.basic_auth_password == SecretStr(f"pw-{TOKEN}")
    launch = config.launches["kimi-ep"]
    assert launch.stall_after == 5400.0
    assert launch.deadlines.by_phase() == {"loading_weights": 1200.0, "capturing_graphs": 900.0}
    assert launch.notify == ("team", "stderr")
    assert launch.labels == {"team": "inference"}
    assert config.launches["local"].engine == "auto"
    assert config.launches["local"].stall_after == 600.0
    assert config.hosts["bastion"].max_channels == 10
    assert config.notifiers["team"].secret_urls() == (HOOK,)
    again = Config.model_validate(config.model_dump())
    # Sections compare equal (secrets by value); where a secret came from is not part of the data.
    assert (again.daemon, again.hosts, again.launches, again.notifiers) == (
        config.daemon,
        config.hosts,
        config.launches,
        config.notifiers,
    )
    assert again.model_dump() == config.model_dump()


def test_config_is_frozen(good: Path) -> None:
    """The loaded config cannot be changed in place: a reload builds a new one."""
    config = load_config(good)
    with pytest.raises(ValidationError):
        config.launches["local"].log = "/other.log"


def test_secrets_never_shown(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Secrets appear in no repr, str, dump, JSON dump, redacted view or check-config output."""
    config = load_config(good)
    shown = [
        repr(config),
        str(config),
        str(config.model_dump()),
        config.model_dump_json(),
        json.dumps(redacted(config)),
        repr(config.notifiers["team"]),
    ]
    assert check_config_main(good) == 0
    out, err = capsys.readouterr()
    shown += [out, err]
    for text in shown:
        assert TOKEN not in text
        assert "hooks.example.com/services" not in text
    view = json.loads(out)
    assert view["daemon"]["basic_auth_password"] == "********** (env:WD_TEST_PASSWORD)"
    assert view["notifiers"]["team"]["url"] == "**********"


def test_file_secret_is_read_and_masked(tmp_path: Path) -> None:
    """A `file:` secret is the file's content without its trailing newline, and redacted shows only its source."""
    secret = tmp_path / "hook"
    secret.write_text(HOOK + "\n", encoding="utf-8")
    path = _write(
        tmp_path, f'[notifiers.t]\nkind = "webhook"\nurls = ["file:{secret}", "https://b.example/x"]\n'
    )
    config = load_config(path)
    assert config.notifiers["t"].secret_urls() == (HOOK, "https://b.example/x")
    assert redacted(config)["notifiers"]["t"]["urls"] == [f"********** (file:{secret})", "**********"]


def test_empty_secret_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment variable that is set but empty is not a secret: the key is named."""
    monkeypatch.setenv("WD_TEST_EMPTY", "")
    path = _write(tmp_path, '[daemon]\nbasic_auth_user = "u"\nbasic_auth_password = "env:WD_TEST_EMPTY"\n')
    with pytest.raises(
        ConfigError, match=r"daemon\.basic_auth_password: the secret from env:WD_TEST_EMPTY is empty"
    ):
        load_config(path)


def test_empty_file_is_a_valid_config(tmp_path: Path) -> None:
    """An empty file is the defaults: listen on 127.0.0.1:9469, no launches."""
    config = load_config(_write(tmp_path, ""))
    assert config.daemon.listen == "127.0.0.1:9469"
    assert config.daemon.listen_is_loopback
    assert config.daemon.log_format == "json"
    assert config.launches == {}


@pytest.mark.parametrize(
    "listen",
    ["[::1]:9469", "localhost:0", "127.0.0.2:80"],
)
def test_loopback_listen_needs_no_auth(tmp_path: Path, listen: str) -> None:
    """A loopback listen address (IPv4, IPv6, localhost) needs neither TLS nor basic auth."""
    config = load_config(_write(tmp_path, f'[daemon]\nlisten = "{listen}"\n'))
    assert config.daemon.listen_is_loopback


def test_insecure_public_is_explicit(tmp_path: Path) -> None:
    """`insecure_public = true` allows a public listen address without TLS and auth."""
    config = load_config(_write(tmp_path, '[daemon]\nlisten = "0.0.0.0:9469"\ninsecure_public = true\n'))
    assert config.daemon.listen_host == "0.0.0.0"


def test_model_validate_checks_references() -> None:
    """Validating parsed data directly (no file) applies the cross-table rules too."""
    with pytest.raises(ConfigError) as caught:
        Config.model_validate({"launches": {"a": {"log": "/x.log", "host": "nope"}}})
    assert caught.value.key == "launches.a.host"


def test_launch_spec_from_config(good: Path) -> None:
    """A launch becomes the follower's LaunchSpec: target from its host, engine, process, health and stall time."""
    config = load_config(good)
    spec = launch_spec(config, "kimi-ep")
    assert spec.name == "kimi-ep"
    assert spec.target == Target(host="10.1.230.174", user="root", port=2222, path="/data/logs/ep.log")
    assert spec.engine == "sglang"
    assert spec.process == "sglang.launch_server"
    assert spec.health_url == "http://127.0.0.1:30000/health"
    assert spec.stall_after == 5400.0
    home = config.launch_spec("home")
    assert home.target.path == "logs/vllm.log"  # relative to the remote home, as `watch host:~/x` reads it
    assert home.engine is None
    assert home.process is None
    assert home.pid_file == "/run/vllm.pid"  # read on the host at each process check
    local = config.launch_spec("local")
    assert local.target == Target(host=None, user=None, port=None, path="/var/log/llama/server.log")
    assert (
        redacted(config)["launches"]["kimi-ep"]["target"] == "ssh://root@10.1.230.174:2222/data/logs/ep.log"
    )


def test_host_without_address_is_its_name(tmp_path: Path) -> None:
    """A host without `address` is reached by its table name, an ~/.ssh/config alias."""
    config = load_config(_write(tmp_path, '[hosts.gpu2]\n[launches.a]\nhost = "gpu2"\nlog = "/x.log"\n'))
    assert launch_spec(config, "a").target.host == "gpu2"
    assert ssh_options(config, "gpu2").identity is None


def test_ssh_options_from_host(good: Path) -> None:
    """A host's identity, known_hosts and channel limit become the SSH options of its pool."""
    config = load_config(good)
    options = ssh_options(config, "gpu1")
    assert options.identity == "/etc/llm-launch-watchdog/id_ed25519"
    assert options.known_hosts == "/etc/llm-launch-watchdog/known_hosts"
    assert not options.accept_new_host_key
    assert options.max_channels == config.hosts["gpu1"].max_channels
    assert options.stat_interval == 2.0
    assert ssh_options(config, "bastion").stat_interval == 0.25  # the default


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param(90, 90.0, id="int"),
        pytest.param(1.5, 1.5, id="float"),
        pytest.param("90", 90.0, id="bare-string"),
        pytest.param("90s", 90.0, id="s"),
        pytest.param("10m", 600.0, id="m"),
        pytest.param("1h30m", 5400.0, id="h-m"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("2d", 172800.0, id="d"),
        pytest.param(" 1h2m3s ", 3723.0, id="all-spaced"),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    """Durations are seconds, or strings with d/h/m/s units in order."""
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value", ["", "5x", "m", "1m1h", "1h30", "-5m", "0s", "nan", "inf", "1e3", False, None, [1]]
)
def test_bad_durations(value: object) -> None:
    """Anything else is refused with a message that says what a duration looks like."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


def test_example_file_loads(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """deploy/config.example.toml is valid (its secrets set in the environment) and check-config says so."""
    for name, value in EXAMPLE_ENV.items():
        monkeypatch.setenv(name, value)
    config = load_config(EXAMPLE)
    assert set(config.launches) == {
        "kimi-ep",
        "llama-vllm",
        "sglang-docker",
        "vllm-unit",
        "vllm-pod",
        "vllm-deployment",
        "local-llamacpp",
        "deepseek-2node",
        "qwen-launched",
    }
    assert config.launch_spec("llama-vllm").target.path == "logs/vllm.log"
    assert config.launch_spec("qwen-launched").pid_file == "logs/qwen.log.pid"  # launch mode's pid file
    assert check_config_main(EXAMPLE) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["notifiers"]["team"]["url"] == "********** (env:WATCHDOG_TEAM_WEBHOOK)"
    assert json.loads(out)["notifiers"]["oncall"]["routing_key"] == "********** (env:WATCHDOG_PAGERDUTY_KEY)"
    assert "valid: 9 launches, 3 hosts, 9 notifiers" in err
    nodes = json.loads(out)["launches"]["deepseek-2node"]["nodes"]
    assert [(n["name"], n["target"]) for n in nodes] == [
        ("rank0", "ssh://root@10.1.230.174:22/data/logs/deepseek-node0.log"),
        ("rank1", "ssh://ubuntu@gpu2/~/logs/deepseek-node1.log"),
    ]
    for token in ("team-token-1", "pd-routing-key-2", "mm-token-3", "tg-token-4", "apprise-token-5"):
        assert token not in out + err


def test_example_file_shows_every_key() -> None:
    """The example names every key of every section, so that it is the complete reference by example."""
    text = EXAMPLE.read_text(encoding="utf-8")
    written = set(re.findall(r"^#?\s*([a-z_]+) = ", text, re.MULTILINE))
    written |= set(re.findall(r"deadlines = \{(.*)\}", text)[-1].replace("=", " ").split()[::2])
    schema = config_json_schema()
    for section in schema["$defs"].values():
        missing = set(section["properties"]) - written
        assert not missing, f"{section['title']}: {sorted(missing)} not in {EXAMPLE.name}"


def test_docs_tables_match_the_models() -> None:
    """The key tables of docs/config.md are the ones generated from the models."""
    text = DOCS.read_text(encoding="utf-8")
    begin = "<!-- BEGIN GENERATED: watchdog config-schema --markdown -->\n"
    start = text.index(begin) + len(begin)
    end = text.index("<!-- END GENERATED -->")
    assert text[start:end] == config_reference_markdown() + "\n"


def test_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """`config-schema` prints a JSON Schema that forbids unknown keys and masks secret fields."""
    assert config_schema_main() == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == config_json_schema()
    assert set(schema["properties"]) == {"daemon", "hosts", "launches", "notifiers"}
    assert schema["additionalProperties"] is False
    for section in schema["$defs"].values():
        assert section["additionalProperties"] is False
    launch = schema["$defs"]["LaunchConfig"]
    assert launch["oneOf"] == [{"required": [key]} for key in ("log", "container", "unit", "pod", "nodes")]
    pattern = re.compile(launch["properties"]["stall_after"]["anyOf"][1]["pattern"])
    assert pattern.match("1h30m")
    notifier = schema["$defs"]["NotifierConfig"]["properties"]
    assert notifier["kind"]["enum"] == [*notifiers.KINDS, "apprise", "console"]
    assert notifier["url"]["anyOf"][0]["writeOnly"] is True


def test_dotted_names_are_quoted_in_key_paths(tmp_path: Path) -> None:
    """A table name with dots is allowed and quoted in key paths, as TOML writes it."""
    path = _write(
        tmp_path,
        '[hosts."gpu1.lab"]\n[launches."gpu1.lab-ep"]\nhost = "gpu1.lab"\nlog = "/x.log"\nnotify = ["t"]\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == 'launches."gpu1.lab-ep".notify[0]'


def test_check_config_warns_about_what_looks_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-config accepts (exit 0) but warns about an unused host and notifier and an unreadable key file."""
    path = _write(
        tmp_path,
        '[hosts.idle]\nidentity = "{tmp}/no-such-key"\n[notifiers.quiet]\nkind = "console"\n'
        '[launches.a]\nlog = "{tmp}/logs/a.log"\n',
    )
    assert check_config_main(path) == 0
    err = capsys.readouterr().err
    assert f"warning: {path}: hosts.idle: no launch uses this host" in err
    assert f"warning: {path}: notifiers.quiet: no launch notifies it" in err
    assert f"hosts.idle.identity: {tmp_path}/no-such-key cannot be read here" in err
    assert f"launches.a.log: directory {tmp_path}/logs does not exist (yet)" in err
    assert "valid: 1 launch, 1 host, 1 notifier" in err


def test_command_line_exits_78(tmp_path: Path) -> None:
    """The installed `watchdog check-config` exits 78 on a bad file, naming file and key, without a traceback."""
    path = _write(tmp_path, '[launches.a]\nlog = "/x.log"\nengine = "sglang2"\n')
    done = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "check-config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == EXIT_CONFIG
    assert done.stderr.startswith(f"watchdog: configuration error: {path}: launches.a.engine: unknown engine")
    assert "Traceback" not in done.stderr


def test_min_severity_keeps_the_severe_kinds_and_their_resolutions() -> None:
    """min_severity = "error" keeps crashed and unreachable, drops stalled and ready, keeps resolved."""
    config = parse_config(
        {
            "notifiers": {
                "pd": {
                    "kind": "slack",
                    "url": "https://hooks.example.com/x",
                    "on": ["crashed", "stalled", "ready", "unreachable", "resolved"],
                    "min_severity": "error",
                }
            }
        }
    )
    assert config.notifiers["pd"].alert_kinds() == ("crashed", "unreachable", "resolved")


def test_learned_deadlines_and_gpu_interval_reach_the_daemon() -> None:
    """learned_factor and learn_deadlines reach the launch's plan, gpu_interval its spec."""
    from watchdog.daemon.service import plans_from  # noqa: PLC0415

    config = parse_config(
        {
            "launches": {
                "a": {"log": "/a.log", "learned_factor": 3, "gpu": True, "gpu_interval": "10s"},
                "b": {"log": "/b.log", "learn_deadlines": False},
            }
        }
    )
    plans = plans_from(config)
    assert plans["a"].learned_factor == 3.0
    assert plans["a"].spec.gpu_interval == 10.0
    assert plans["b"].learned_factor is None
    with pytest.raises(ConfigError, match="give a factor from 1 to 100"):
        parse_config({"launches": {"a": {"log": "/a.log", "learned_factor": 0.5}}})


def test_check_config_says_the_daemon_would_refuse_a_host_its_known_hosts_file_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check-config` with a readable known_hosts that has no key for a host a launch uses: exit 69 (the daemon
    would refuse the host), naming the host, its address:port, the file and how to record the key; exit 0 once
    the file has it, or when the host may accept a new key."""
    import subprocess  # noqa: PLC0415

    from watchdog.cli.checkconfig import check_config_main  # noqa: PLC0415

    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"[10.9.9.9]:2222 {(tmp_path / 'key.pub').read_text()}")
    config = tmp_path / "watchdog.toml"
    hosts = f'[hosts.gpu1]\naddress = "10.1.2.3"\nport = 2222\nknown_hosts = "{known}"\n'
    config.write_text(f'{hosts}[launches.a]\nhost = "gpu1"\nlog = "/data/a.log"\n')
    assert check_config_main(config) == 69
    err = capsys.readouterr().err
    assert f"hosts.gpu1.known_hosts: {known} has no key for host gpu1 (10.1.2.3:2222)" in err
    assert f"ssh-keyscan -p 2222 10.1.2.3 >> {known}" in err
    assert "or set hosts.gpu1.accept_new_host_key = true" in err
    assert f"{config}: valid, but the daemon would refuse 1 host (gpu1): its key is not in" in err
    config.write_text(
        f'{hosts}accept_new_host_key = true\n[launches.a]\nhost = "gpu1"\nlog = "/data/a.log"\n'
    )
    assert check_config_main(config) == 0
    assert "has no key" not in capsys.readouterr().err
    known.write_text(f"[10.1.2.3]:2222 {(tmp_path / 'key.pub').read_text()}")
    config.write_text(f'{hosts}[launches.a]\nhost = "gpu1"\nlog = "/data/a.log"\n')
    assert check_config_main(config) == 0
    assert "has no key" not in capsys.readouterr().err


# -- a user's engine in the daemon's config ---------------------------------------------------------------

_MYENGINE_CRASH = (
    "MyEngine v1.4 starting on myengine.server:8000\n"
    "loading checkpoint /models/m\n"
    "loaded shard 1 of 2\n"
    "engine halted: device lost\n"
)


def _doc_profile(tmp_path: Path) -> Path:
    # docs/profiles.md's new-engine example, word for word
    doc = (Path(__file__).parent.parent / "docs" / "profiles.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(# myengine\.toml\n.*?)```", doc, re.S)
    assert block is not None
    path = tmp_path / "myengine.toml"
    path.write_text(block.group(1), encoding="utf-8")
    return path


def test_a_launch_names_a_user_engine_whose_profile_it_lists(tmp_path: Path) -> None:
    """`engine = "myengine"` with its profile in `profiles`: the launch's analyzer reads the log with the
    user's rules (the documented example's `engine halted:` is its crash)."""
    profile = _doc_profile(tmp_path)
    path = _write(
        tmp_path,
        f'[launches.mine]\nlog = "/tmp/mine.log"\nengine = "myengine"\nprofiles = ["{profile}"]\n',
    )
    spec = load_config(path).launch_spec("mine")
    assert spec.engine == "myengine"
    analyzer = Analyzer(load_engine(spec.engine, spec.profiles))
    analyzer.feed(_MYENGINE_CRASH.encode(), 0.0)
    analyzer.finish(0.0)
    verdict = build_verdict(analyzer)
    assert (verdict.engine, verdict.state) == ("myengine", State.CRASHED)
    assert verdict.error is not None
    assert verdict.error.summary.startswith("engine halted: device lost")


def test_a_user_engine_without_its_profile_or_with_a_broken_one_is_a_config_error(tmp_path: Path) -> None:
    """An engine no bundled profile and no listed one names, or a listed profile that does not load, is a
    configuration error naming the key (and the profile's file and key) and what is allowed."""
    path = _write(tmp_path, '[launches.mine]\nlog = "/tmp/mine.log"\nengine = "myengine"\n')
    with pytest.raises(
        ConfigError, match=r"launches\.mine\.engine: unknown engine 'myengine'; allowed: auto"
    ):
        load_config(path)
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x"\n[[phase]]\nstate = "nope"\nmatch = "a"\n', encoding="utf-8")
    path = _write(tmp_path, f'[launches.mine]\nlog = "/tmp/mine.log"\nprofiles = ["{broken}"]\n')
    with pytest.raises(
        ConfigError, match=rf"launches\.mine\.profiles\[0\]: {re.escape(str(broken))}: phase\[0\]"
    ):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "target"),
    [
        pytest.param(
            '[launches.a]\ncontainer = "sglang"\n',
            Target(None, None, None, "sglang", kind="docker"),
            id="docker",
        ),
        pytest.param(
            '[hosts.g]\nruntime = "podman"\nuser = "u"\n[launches.a]\nhost = "g"\ncontainer = "sglang"\n',
            Target("g", "u", None, "sglang", kind="podman"),
            id="podman-host",
        ),
        pytest.param(
            '[hosts.g]\n[launches.a]\nhost = "g"\nunit = "vllm.service"\n',
            Target("g", None, None, "vllm.service", kind="journald"),
            id="unit",
        ),
        pytest.param(
            '[launches.a]\npod = "ctx/llm/vllm-0/server"\n',
            Target(None, None, None, "llm/vllm-0/server", kind="k8s", context="ctx"),
            id="pod",
        ),
        pytest.param(
            '[launches.a]\npod = "llm/vllm-0"\ncontext = "prod"\nkubeconfig = "/etc/kube.yaml"\n',
            Target(None, None, None, "llm/vllm-0?kubeconfig=/etc/kube.yaml", kind="k8s", context="prod"),
            id="pod-kubeconfig",
        ),
        pytest.param(
            '[launches.a]\nselector = "app=vllm"\nnamespace = "llm"\ncontainer = "server"\n',
            Target(None, None, None, "llm?selector=app=vllm&container=server", kind="k8s"),
            id="selector",
        ),
    ],
)
def test_a_launch_names_a_container_a_unit_or_a_pod(tmp_path: Path, text: str, target: Target) -> None:
    """`container` (with the host's runtime), `unit` and `pod` name what a launch follows instead of `log`."""
    assert launch_spec(load_config(_write(tmp_path, text)), "a").target == target


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        pytest.param('[launches.a]\nlog = "/x"\nunit = "u"\n', "launches.a.unit", "only one of", id="two"),
        pytest.param(
            '[launches.a]\ncontainer = "-it"\n', "launches.a.container", "not a container", id="dash"
        ),
        pytest.param(
            '[hosts.g]\n[launches.a]\nhost = "g"\npod = "n/p"\n', "launches.a.pod", "remove host", id="ssh"
        ),
        pytest.param('[hosts.g]\nruntime = "lxc"\n', "hosts.g.runtime", "docker", id="runtime"),
        pytest.param('[hosts.g]\nssh_multiplex = "on"\n', "hosts.g.ssh_multiplex", "auto", id="multiplex"),
        pytest.param(
            '[launches.a]\nselector = "app=x"\n', "launches.a.namespace", "required", id="no-namespace"
        ),
        pytest.param(
            '[launches.a]\npod = "n/p"\nnamespace = "n"\n', "launches.a.namespace", "selector", id="namespace"
        ),
        pytest.param(
            '[launches.a]\nlog = "/x"\nkubeconfig = "/k"\n', "launches.a.kubeconfig", "pod", id="kube"
        ),
    ],
)
def test_a_launch_names_exactly_one_thing(tmp_path: Path, text: str, key: str, message: str) -> None:
    """Two kind keys, a name that could pass for an option, a pod over SSH or an unknown runtime are config errors."""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert caught.value.key == key
    assert message in str(caught.value)


def test_nodes_launch_validates_and_gives_each_node_its_spec() -> None:
    """A launch with nodes validates; each node gets its own spec (its source, process), named LAUNCH@NODE
    (its checkpoint's key), named by its host when it has no name; the launch's spec is the serving node's."""
    config = Config.model_validate(
        {
            "hosts": {"gpu1": {}, "gpu2": {"runtime": "podman"}},
            "launches": {
                "ds": {
                    "engine": "sglang",
                    "nodes": [
                        {"host": "gpu1", "log": "/data/n0.log", "process": "sglang"},
                        {"host": "gpu2", "container": "sgl", "serve": True},
                        {"log": "/var/log/n2.log"},
                    ],
                }
            },
        }
    )
    specs = node_specs(config, "ds")
    assert [(name, host, spec.name, spec.target.kind) for name, host, spec in specs] == [
        ("gpu1", "gpu1", "ds@gpu1", "file"),
        ("gpu2", "gpu2", "ds@gpu2", "podman"),
        ("node2", "", "ds@node2", "file"),
    ]
    assert specs[0][2].process == "sglang"
    assert specs[0][2].engine == "sglang"
    assert config.launch_spec("ds").name == "ds"
    assert config.launch_spec("ds").target == specs[1][2].target


def test_check_config_explains_a_nodes_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check-config` shows each node's resolved name, serving node and target, counts a node's host as used,
    and warns of a node's local log whose directory is missing."""
    path = _write(
        tmp_path,
        '[hosts.gpu1]\n[launches.ds]\nnodes = [{ host = "gpu1", log = "/data/n0.log" }, '
        '{ log = "/nonexistent-dir-i29/n1.log" }]\n',
    )
    assert check_config_main(path) == 0
    out, err = capsys.readouterr()
    nodes = json.loads(out)["launches"]["ds"]["nodes"]
    assert [(n["name"], n["serve"], n["target"]) for n in nodes] == [
        ("gpu1", True, "ssh://gpu1/data/n0.log"),
        ("node1", False, "/nonexistent-dir-i29/n1.log"),
    ]
    assert "hosts.gpu1: no launch uses this host" not in err
    assert "launches.ds.nodes[1].log: directory /nonexistent-dir-i29 does not exist (yet)" in err
