"""The config from the environment: `LLW_SECTION__KEY` variables over the file, their errors, and a daemon
whose whole config they are."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from watchdog.cli.app import main
from watchdog.cli.checkconfig import check_config_main
from watchdog.config import Config, load_config
from watchdog.config.environment import config_variables, set_by_environment
from watchdog.exceptions import ConfigError
from watchdog.vocabulary import EXIT_CONFIG, EXIT_USAGE

sys.path.insert(0, str(Path(__file__).parent))
from daemon_process import DaemonProcess
from http_client import get

FIXTURES = Path(__file__).parent / "fixtures"
OOM_LOG = FIXTURES / "corpus" / "sglang" / "oom-capture-cuda-graph-deepep-issue5285.log"
SLACK = "https://hooks.slack.com/services/T000/B000/SECRETSECRET"

# The file the variables go over: a launch whose name has a dash, a host, a notifier with a secret.
FILE = f"""
[daemon]
listen = "127.0.0.1:9469"

[hosts.gpu1]
address = "10.0.0.1"

[launches.kimi-ep]
host = "gpu1"
log = "logs/kimi.log"
stall_after = "5m"
notify = ["team"]
labels = {{ team = "inference" }}

[notifiers.team]
kind = "slack"
url = "{SLACK}"
"""


def _load(tmp_path: Path, environ: dict[str, str], text: str | None = FILE) -> Config:
    if text is None:
        return load_config(None, environ=environ)
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path, environ=environ)


Check = Callable[[Config], Any]

VALID = [
    pytest.param(
        {"LLW_DAEMON__LISTEN": "127.0.0.1:9100"},
        lambda c: c.daemon.listen,
        "127.0.0.1:9100",
        id="a daemon key overrides the file",
    ),
    pytest.param(
        {"llw_daemon__listen": "127.0.0.1:9100"},
        lambda c: c.daemon.listen,
        "127.0.0.1:9100",
        id="names in any case",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__STALL_AFTER": "10m"},
        lambda c: c.launches["kimi-ep"].stall_after,
        600.0,
        id="KIMI_EP finds the file's kimi-ep",
    ),
    pytest.param(
        {"LLW_LAUNCHES__kimi-ep__STALL_AFTER": "90"},
        lambda c: c.launches["kimi-ep"].stall_after,
        90.0,
        id="an exact spelling with a dash; a TOML number",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__DEADLINES__LOADING_WEIGHTS": "20m"},
        lambda c: c.launches["kimi-ep"].deadlines.by_phase(),
        {"loading_weights": 1200.0},
        id="a key of a nested table",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__LABELS__OWNER": "ml"},
        lambda c: dict(c.launches["kimi-ep"].labels),
        {"team": "inference", "owner": "ml"},
        id="a new label beside the file's",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__LABELS__TEAM": "serving"},
        lambda c: dict(c.launches["kimi-ep"].labels),
        {"team": "serving"},
        id="a label of the file overridden",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__NOTIFY": "[]"},
        lambda c: c.launches["kimi-ep"].notify,
        (),
        id="a TOML array replaces the file's",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__GPU": "true"},
        lambda c: c.launches["kimi-ep"].gpu,
        True,
        id="a TOML boolean",
    ),
    pytest.param(
        {"LLW_HOSTS__GPU1__ADDRESS": "10.1.230.174", "LLW_HOSTS__GPU1__PORT": "2222"},
        lambda c: (c.hosts["gpu1"].address, c.hosts["gpu1"].port),
        ("10.1.230.174", 2222),
        id="an address is text, a port a number",
    ),
    pytest.param(
        {"LLW_LAUNCHES__QWEN__LOG": "/var/log/qwen.log", "LLW_LAUNCHES__QWEN__ENGINE": "vllm"},
        lambda c: (sorted(c.launches), c.launches["qwen"].engine),
        (["kimi-ep", "qwen"], "vllm"),
        id="a whole launch from the environment",
    ),
    pytest.param(
        {"LLW_LAUNCHES__QWEN": '{ log = "/var/log/qwen.log", engine = "vllm" }'},
        lambda c: (c.launches["qwen"].log, c.launches["qwen"].engine),
        ("/var/log/qwen.log", "vllm"),
        id="a whole launch as one inline table",
    ),
    pytest.param(
        {"LLW_LAUNCHES": '{ "Qwen.72B" = { log = "/var/log/q.log" } }'},
        lambda c: sorted(c.launches),
        ["Qwen.72B", "kimi-ep"],
        id="a name no variable name can spell, in a table's value",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP": '{ engine = "sglang" }'},
        lambda c: (c.launches["kimi-ep"].engine, c.launches["kimi-ep"].stall_after),
        ("sglang", 300.0),
        id="an inline table merges into the file's key by key",
    ),
    pytest.param(
        {"LLW_LAUNCHES__kimi-ep2__LOG": "/x.log", "LLW_LAUNCHES__KIMI_EP2__ENGINE": "vllm"},
        lambda c: (c.launches["kimi-ep2"].log, c.launches["kimi-ep2"].engine),
        ("/x.log", "vllm"),
        id="a new name spelled with a dash once, then KIMI_EP2",
    ),
    pytest.param(
        {
            "LLW_NOTIFIERS__TG__KIND": "telegram",
            "LLW_NOTIFIERS__TG__URL": "https://api.telegram.org/bot1:x/sendMessage",
            "LLW_NOTIFIERS__TG__CHAT_ID": "-1001234567890",
        },
        lambda c: c.notifiers["tg"].chat_id,
        "-1001234567890",
        id="digits for a key that takes text stay text",
    ),
    pytest.param(
        {
            "LLW_NOTIFIERS__HOOK__KIND": "webhook",
            "LLW_NOTIFIERS__HOOK__URL": "https://example.com/hook",
            "LLW_NOTIFIERS__HOOK__TEMPLATE": '"42"',
        },
        lambda c: c.notifiers["hook"].template,
        "42",
        id="a quoted value is a TOML string",
    ),
    pytest.param(
        {"LLW_DAEMON__BASIC_AUTH_USER": "prom", "LLW_DAEMON__BASIC_AUTH_PASSWORD": '"[12345'},
        lambda c: c.daemon.basic_auth_password.get_secret_value() if c.daemon.basic_auth_password else None,
        '"[12345',
        id="a secret is the text as it is",
    ),
    pytest.param(
        {"LLW_NOTIFIERS__TEAM__URL": "env:SLACK_FROM_ELSEWHERE", "SLACK_FROM_ELSEWHERE": SLACK + "2"},
        lambda c: c.notifiers["team"].secret_urls(),
        (SLACK + "2",),
        id="a secret reference is resolved as in the file",
    ),
    pytest.param(
        {
            "LLW_SERVICE_HOST": "10.96.0.7",
            "LLW_PORT_9469_TCP_ADDR": "10.96.0.7",
            "LLW_WEB_SERVICE_PORT": "80",
        },
        lambda c: c.daemon.listen,
        "127.0.0.1:9469",
        id="Kubernetes service links are left alone",
    ),
    pytest.param(
        {"WATCHDOG_SHARDS": "3", "LLWX_DAEMON__LISTEN": "nope"},
        lambda c: c.daemon.listen,
        "127.0.0.1:9469",
        id="other variables are not the config's",
    ),
]


@pytest.mark.parametrize(("environ", "read", "expected"), VALID)
def test_variables_set_keys(tmp_path: Path, environ: dict[str, str], read: Check, expected: object) -> None:
    """Each variable sets the key its name spells, its value read as TOML when the key takes that, over the
    file."""
    assert read(_load(tmp_path, environ)) == expected


ERRORS = [
    pytest.param(
        {"LLW_DAEMON__LISTN": "127.0.0.1:9100"},
        "LLW_DAEMON__LISTN: daemon.listn: unknown key; allowed: listen, state_dir,",
        id="an unknown key names the variable and what is allowed",
    ),
    pytest.param(
        {"LLW_DAEMON_LISTEN": "127.0.0.1:9100"},
        "(levels are separated by two underscores: LLW_DAEMON__LISTEN)",
        id="one underscore between levels",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__DEADLINES_STARTING": "5m"},
        "two underscores: LLW_LAUNCHES__KIMI_EP__DEADLINES__STARTING)",
        id="one underscore deeper down",
    ),
    pytest.param(
        {"LLW_DAEMON____LISTEN": "x"},
        "LLW_DAEMON____LISTEN: levels are separated by exactly two underscores",
        id="an empty level",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__STALL_AFTER": "10 minutes"},
        "LLW_LAUNCHES__KIMI_EP__STALL_AFTER: launches.kimi-ep.stall_after: '10 minutes' is not a duration",
        id="a bad value is the file's error, of the variable",
    ),
    pytest.param(
        {"LLW_HOSTS__GPU1__PORT": "70000"},
        "LLW_HOSTS__GPU1__PORT: hosts.gpu1.port: 70000 is not a port",
        id="a number out of range",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__GPU": "yes"},
        "LLW_LAUNCHES__KIMI_EP__GPU: launches.kimi-ep.gpu: must be true or false, not a string",
        id="text for a boolean",
    ),
    pytest.param(
        {"LLW_DAEMON__LISTEN": "0.0.0.0:9469"},
        "LLW_DAEMON__LISTEN: daemon.listen: '0.0.0.0:9469' is reachable from other machines",
        id="a rule across keys broken by a variable",
    ),
    pytest.param(
        {"LLW_LAUNCHES__QWEN__ENGINE": "vllm"},
        "LLW_LAUNCHES__QWEN__ENGINE: launches.qwen.log: is required: one of log, container, unit, pod (or selector) "
        "names what to follow: set LLW_LAUNCHES__QWEN__LOG too",
        id="a launch the environment made lacks its log",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__HOST": "gpu9"},
        "LLW_LAUNCHES__KIMI_EP__HOST: launches.kimi-ep.host: unknown host 'gpu9'; defined: gpu1",
        id="a reference to no table",
    ),
    pytest.param(
        {"LLW_LAUNCHES__KIMI_EP__LOG__PATH": "/x"},
        "launches.kimi-ep.log: is a value, not a table: end the variable's name at LLW_LAUNCHES__KIMI_EP__LOG",
        id="a level below a value",
    ),
    pytest.param(
        {"LLW_DAEMON": "listen"},
        "LLW_DAEMON: daemon: is a table: give a TOML inline table",
        id="a table given text",
    ),
    pytest.param(
        {"LLW_DAEMON": '{ listen = "127.0.0.1:1" }', "LLW_DAEMON__LISTEN": "127.0.0.1:2"},
        "LLW_DAEMON__LISTEN: daemon.listen: also set by LLW_DAEMON: set each key once",
        id="one key set by two variables",
    ),
    pytest.param(
        {"LLW_DAEMON__LISTEN": "127.0.0.1:1", "llw_daemon__listen": "127.0.0.1:2"},
        "daemon.listen: also set by",
        id="one key in two cases",
    ),
    pytest.param(
        {"LLW_NOTIFIERS__TEAM__URL": "env:NOT_SET_ANYWHERE_I28"},
        "LLW_NOTIFIERS__TEAM__URL: notifiers.team.url: environment variable NOT_SET_ANYWHERE_I28 is not set",
        id="a secret reference that cannot be resolved",
    ),
    pytest.param(
        {"LLW_NOTIFIERS__TEAM__URL": "hooks.slack.com/services/T000/B000/HUSHHUSH"},
        "LLW_NOTIFIERS__TEAM__URL: notifiers.team.url: not an http(s) URL (not shown",
        id="a bad secret is not shown",
    ),
    pytest.param(
        {"LLW_TYPO": "9469"},
        "LLW_TYPO: typo: unknown key; allowed: daemon, hosts, launches, notifiers",
        id="not a service link",
    ),
]


@pytest.mark.parametrize(("environ", "said"), ERRORS)
def test_bad_variables_are_configuration_errors(tmp_path: Path, environ: dict[str, str], said: str) -> None:
    """A variable that names no key, or gives a value the key refuses, is a configuration error that names
    the variable and the key, and shows no secret."""
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, environ)
    assert said in str(caught.value)
    assert "HUSHHUSH" not in str(caught.value)


@pytest.mark.parametrize(
    ("exact", "other"),
    [
        pytest.param("kimi-ep", "kimi_ep", id="a dash and an underscore"),
        pytest.param("kimi-ep", "kimi.ep", id="a dash and a dot"),
        pytest.param("kimi-ep", "KIMI-EP", id="two cases"),
    ],
)
def test_ambiguous_names_are_refused_and_an_exact_spelling_is_not(
    tmp_path: Path, exact: str, other: str
) -> None:
    """With two tables that KIMI_EP could stand for, KIMI_EP is an error naming both; one spelled exactly
    sets that one."""
    text = f'[launches."{exact}"]\nlog = "/a.log"\n[launches."{other}"]\nlog = "/b.log"\n'
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, {"LLW_LAUNCHES__KIMI_EP__ENGINE": "vllm"}, text)
    first, second = sorted((exact, other))
    assert str(caught.value).startswith(
        f"LLW_LAUNCHES__KIMI_EP__ENGINE: launches: KIMI_EP could be launches.{first} and launches.{second}"
        if "." not in other
        else f'LLW_LAUNCHES__KIMI_EP__ENGINE: launches: KIMI_EP could be launches.{first} and launches."{second}"'
    )
    config = _load(tmp_path, {f"LLW_LAUNCHES__{exact}__ENGINE": "vllm"}, text)
    assert (config.launches[exact].engine, config.launches[other].engine) == ("vllm", "auto")


def test_without_a_file_the_environment_is_the_config(tmp_path: Path) -> None:
    """With no file, the defaults and the variables are the config, and each key set is said with its
    variable."""
    environ = {
        "LLW_DAEMON__STATE_DIR": str(tmp_path / "state"),
        "LLW_LAUNCHES__KIMI__LOG": "/var/log/kimi.log",
    }
    config = _load(tmp_path, environ, None)
    assert config.daemon.listen == "127.0.0.1:9469"
    assert config.launches["kimi"].log == "/var/log/kimi.log"
    assert set_by_environment(config) == {
        "daemon.state_dir": "LLW_DAEMON__STATE_DIR",
        "launches.kimi.log": "LLW_LAUNCHES__KIMI__LOG",
    }
    with pytest.raises(ConfigError, match=r"^LLW_LAUNCHES: launches.kimi-ep2.log: 'x' is relative"):
        _load(tmp_path, {"LLW_LAUNCHES": '{ kimi-ep = { log = "/a" }, kimi-ep2 = { log = "x" } }'}, None)


def test_config_variables_leave_service_links_out() -> None:
    """The config's variables are those starting with LLW_ in any case, but for Kubernetes' service links."""
    environ = {
        "LLW_DAEMON__LISTEN": "a",
        "llw_daemon__state_dir": "b",
        "LLW_LAUNCHES__X__PORT": "c",
        "LLW_SERVICE_HOST": "d",
        "LLW_METRICS_SERVICE_PORT_HTTP": "e",
        "LLW_PORT_9469_TCP_PROTO": "f",
        "LLW_TYPO": "g",
        "PATH": "/bin",
    }
    assert config_variables(environ) == [
        "LLW_DAEMON__LISTEN",
        "LLW_LAUNCHES__X__PORT",
        "LLW_TYPO",
        "llw_daemon__state_dir",
    ]


def test_check_config_names_the_keys_the_environment_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check-config` says on standard error which key each variable set, counts them, and shows a secret a
    variable set masked, with the variable's name."""
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    monkeypatch.setenv("LLW_LAUNCHES__KIMI_EP__STALL_AFTER", "10m")
    monkeypatch.setenv("LLW_NOTIFIERS__TEAM__URL", SLACK + "HUSHHUSH")
    assert check_config_main(path) == 0
    out, err = capsys.readouterr()
    resolved = json.loads(out)
    assert resolved["launches"]["kimi-ep"]["stall_after"] == 600.0
    assert resolved["notifiers"]["team"]["url"] == "********** (LLW_NOTIFIERS__TEAM__URL)"
    assert (
        "watchdog: launches.kimi-ep.stall_after: set by the environment (LLW_LAUNCHES__KIMI_EP__STALL_AFTER)"
        in err
    )
    assert "watchdog: notifiers.team.url: set by the environment (LLW_NOTIFIERS__TEAM__URL)" in err
    assert "1 launch, 1 host, 1 notifier, 2 keys from the environment" in err
    assert "HUSHHUSH" not in out + err


def test_check_config_without_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check-config` with no FILE checks the environment's config; with no LLW_ variable either it is a
    usage error (64), and a bad variable is a configuration error (78) that names it."""
    for name in config_variables(os.environ):
        monkeypatch.delenv(name)
    assert main(["check-config"]) == EXIT_USAGE
    assert "no config: give the config file" in capsys.readouterr().err
    monkeypatch.setenv("LLW_LAUNCHES__KIMI__LOG", "/var/log/kimi.log")
    assert main(["check-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["launches"]["kimi"]["log"] == "/var/log/kimi.log"
    assert (
        "watchdog: the environment: valid: 1 launch, 0 hosts, 0 notifiers, 1 key from the environment" in err
    )
    monkeypatch.setenv("LLW_LAUNCHES__KIMI__STALL_AFTR", "10m")
    assert main(["check-config"]) == EXIT_CONFIG
    assert capsys.readouterr().err.startswith(
        "watchdog: configuration error: LLW_LAUNCHES__KIMI__STALL_AFTR: launches.kimi.stall_aftr: unknown key"
    )


def test_reload_applies_the_same_variables_over_the_edited_file(tmp_path: Path) -> None:
    """Loading again (what SIGHUP does) reads the edited file and the same variables: a key a variable sets
    stays the variable's, the file's other edits are taken."""
    environ = {"LLW_LAUNCHES__KIMI_EP__STALL_AFTER": "10m"}
    first = _load(tmp_path, environ)
    second = _load(
        tmp_path, environ, FILE.replace('stall_after = "5m"', 'stall_after = "1m"\nengine = "vllm"')
    )
    assert (first.launches["kimi-ep"].stall_after, second.launches["kimi-ep"].stall_after) == (600.0, 600.0)
    assert second.launches["kimi-ep"].engine == "vllm"


def test_a_daemon_configured_by_the_environment_alone(tmp_path: Path) -> None:
    """`watchdog run` with no config file, its listen address, state and one launch from variables (the
    launch's name spelled with a dash as Kubernetes allows, its label with KIMI_EP): it logs the keys the
    environment set, and /status shows the launch crashed of the OOM its log ends with."""
    log = tmp_path / "kimi.log"
    shutil.copyfile(OOM_LOG, log)
    env = {name: value for name, value in os.environ.items() if name not in config_variables(os.environ)}
    env |= {
        "LLW_DAEMON__LISTEN": "127.0.0.1:0",
        "LLW_DAEMON__STATE_DIR": str(tmp_path / "state"),
        "LLW_LAUNCHES__kimi-ep__LOG": str(log),
        "LLW_LAUNCHES__KIMI_EP__LABELS__TEAM": "inference",
    }
    daemon = DaemonProcess(None, deadline=30.0, env=env)
    try:
        said = daemon.wait(event="config from the environment")
        assert said["keys"] == {
            "daemon.listen": "LLW_DAEMON__LISTEN",
            "daemon.state_dir": "LLW_DAEMON__STATE_DIR",
            "launches.kimi-ep.labels.team": "LLW_LAUNCHES__KIMI_EP__LABELS__TEAM",
            "launches.kimi-ep.log": "LLW_LAUNCHES__kimi-ep__LOG",
        }
        url = daemon.wait(event="http_listening")["url"]
        daemon.wait(event="transition", launch="kimi-ep", state="crashed")
        status = get(url + "status").json()
        daemon.stop()
    finally:
        daemon.close()
    assert [(s["name"], s["labels"], s["state"], s["error"]["category"]) for s in status] == [
        ("kimi-ep", {"team": "inference"}, "crashed", "oom")
    ]


def test_a_daemon_refuses_a_bad_variable(tmp_path: Path) -> None:
    """`watchdog run` with a variable that names no key exits 78 and names the variable."""
    env = {name: value for name, value in os.environ.items() if name not in config_variables(os.environ)}
    env |= {"LLW_DAEMON__STATE_DIR": str(tmp_path / "state"), "LLW_DAEMON__LISTN": "127.0.0.1:0"}
    daemon = DaemonProcess(None, deadline=30.0, env=env)
    try:
        assert daemon.proc.wait(timeout=30) == EXIT_CONFIG
        daemon.wait(event="(ended)")
    finally:
        daemon.close()
    assert "configuration error: LLW_DAEMON__LISTN: daemon.listn: unknown key" in "".join(daemon.text)
