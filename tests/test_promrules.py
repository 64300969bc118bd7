"""The Prometheus rules from one source (watchdog.daemon.promrules, mixin style): the shipped rule files and
the PrometheusRule are its default output, another selector reaches every selector and still fires every
alert (promtool), and each alert's runbook_url is a section of docs/runbooks.md.

promtool is Debian's `prometheus` package: without it the promtool tests skip, unless
WATCHDOG_REQUIRE_PROMTOOL=1 (CI), where they fail.
"""

from __future__ import annotations

import io
import re
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import require_binary

from watchdog.alerts.notifiers.alertmanager import ALERTNAMES
from watchdog.cli import main
from watchdog.daemon import promrules
from watchdog.vocabulary import EXIT_USAGE, RUNBOOK_URL, runbook_url

ROOT = Path(__file__).parent.parent
RULES_DIR = ROOT / "deploy" / "prometheus" / "rules"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "watchdog_test.yml"
PROMETHEUS_RULE = ROOT / "deploy" / "k8s" / "prometheusrule.yaml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
CUSTOM = 'job="llm-watchdog",cluster="eu-1"'
# A vector selector of a series the daemon serves (or `up` of its job): its name, then its matchers if any.
# Recorded series (`level:metric:operations`) are built from selected ones and need no selector of their own.
_SERIES = re.compile(r"(?<![\w:])(watchdog_\w+|process_\w+|up)\b(?![\w:(])(\{[^}]*\})?")


def _promtool() -> str:
    return require_binary("promtool", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _rules(text: str) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def _alerts() -> list[dict[str, Any]]:
    return [r for path in sorted(RULES_DIR.glob("*.yml")) for r in _rules(path.read_text()) if "alert" in r]


# --- one source ------------------------------------------------------------------------------------------------


def test_the_shipped_rule_files_are_the_generators_default_output() -> None:
    """deploy/prometheus/rules/ holds exactly the rendered templates, byte for byte, with the default selector
    (regenerate: `python -c 'from watchdog.daemon import promrules; ...'`, see docs/deploy.md)."""
    assert sorted(p.name for p in RULES_DIR.glob("*.yml")) == sorted(promrules.RULE_FILES)
    for name, text in promrules.rule_files().items():
        assert (RULES_DIR / name).read_text() == text, f"{name} is not the generator's output"


def test_the_prometheusrule_is_the_generators_default_output() -> None:
    """deploy/k8s/prometheusrule.yaml is `print-rules --kubernetes`; its groups are the rule files' groups."""
    code, out, _ = _cli("print-rules", "--kubernetes")
    assert code == 0
    assert PROMETHEUS_RULE.read_text() == out
    manifest = yaml.safe_load(out)
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    files = {name: yaml.safe_load((RULES_DIR / name).read_text()) for name in promrules.RULE_FILES}
    groups = [g for name in ("watchdog-recording.yml", "watchdog-alerts.yml") for g in files[name]["groups"]]
    assert manifest["spec"]["groups"] == groups
    kustomization = yaml.safe_load((PROMETHEUS_RULE.parent / "kustomization.yaml").read_text())
    assert PROMETHEUS_RULE.name in kustomization["resources"]


def test_the_prometheusrules_groups_pass_promtool(tmp_path: Path) -> None:
    """The PrometheusRule's spec, as a rule file, passes `promtool check rules`."""
    spec = yaml.safe_load(PROMETHEUS_RULE.read_text())["spec"]
    path = tmp_path / "spec.yml"
    path.write_text(yaml.safe_dump(spec))
    result = subprocess.run(
        [_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in spec['groups'])} rules found" in result.stdout


def test_print_rules_prints_every_group_in_one_file() -> None:
    """`print-rules` with no option: one rule file holding the recording and alerting groups as shipped."""
    code, out, _ = _cli("print-rules")
    assert code == 0
    shipped = [
        g
        for name in ("watchdog-recording.yml", "watchdog-alerts.yml")
        for g in yaml.safe_load((RULES_DIR / name).read_text())["groups"]
    ]
    assert yaml.safe_load(out)["groups"] == shipped


# --- selectors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kubernetes", [False, True], ids=["rule-file", "prometheusrule"])
def test_a_custom_selector_reaches_every_series_of_every_rule(kubernetes: bool) -> None:
    """Rendered for another job (and one more label), every selector of a series the daemon serves, in every
    rule, carries it, and the default job appears nowhere."""
    code, out, _ = _cli("print-rules", "--selector", CUSTOM, *(["--kubernetes"] if kubernetes else []))
    assert code == 0
    doc = yaml.safe_load(out)
    rules = [r for g in (doc["spec"] if kubernetes else doc)["groups"] for r in g["rules"]]
    assert len(rules) == 14
    seen = 0
    for rule in rules:
        for match in _SERIES.finditer(rule["expr"]):
            seen += 1
            where = (rule.get("alert") or rule["record"], match[0])
            assert match.group(2), where
            assert CUSTOM in match.group(2), where
    assert seen >= 30
    assert 'job="watchdog"' not in out


def test_the_shipped_rules_select_the_default_job_everywhere() -> None:
    """The shipped rules' series selectors all carry `job="watchdog"`: none reads another job's series."""
    for path in sorted(RULES_DIR.glob("*.yml")):
        for rule in _rules(path.read_text()):
            for match in _SERIES.finditer(rule["expr"]):
                assert match.group(2), (path.name, match[0])
                assert promrules.DEFAULT_SELECTOR in match.group(2), (path.name, match[0])


def _renamed_tests(tmp: Path, rules: dict[str, str], job: str) -> Path:
    """deploy/prometheus/tests/watchdog_test.yml with its series and expected alerts of job "watchdog" moved to
    `job`, next to a rules/ directory holding `rules`."""
    (tmp / "rules").mkdir()
    (tmp / "tests").mkdir()
    for name, text in rules.items():
        (tmp / "rules" / name).write_text(text)
    text = RULE_TESTS.read_text()
    renamed = re.sub(r"job: watchdog\b", f"job: {job}", text.replace('job="watchdog"', f'job="{job}"'))
    assert renamed.count(job) >= 30
    path = tmp / "tests" / RULE_TESTS.name
    path.write_text(renamed)
    return path


def test_every_alert_fires_for_another_job_with_its_selector(tmp_path: Path) -> None:
    """The promtool unit tests of the shipped rules, with the daemon scraped as job "llm-watchdog", pass with
    the rules rendered for `job="llm-watchdog"` (every alert fires as it does for "watchdog")."""
    path = _renamed_tests(tmp_path, promrules.rule_files('job="llm-watchdog"'), "llm-watchdog")
    result = subprocess.run(
        [_promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_default_rules_do_not_read_another_jobs_series(tmp_path: Path) -> None:
    """The same renamed unit tests fail with the default rules: they select job "watchdog" only, so another
    job's series (or another exporter's process_* series) raise none of their alerts."""
    path = _renamed_tests(tmp_path, promrules.rule_files(), "llm-watchdog")
    result = subprocess.run(
        [_promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    for alert in ("WatchdogLaunchCrashed", "WatchdogOutboxBacklog", "WatchdogFileDescriptorsNearLimit"):
        assert f"alertname: {alert}" in result.stdout + result.stderr, alert


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--selector", ""),
        ("--selector", "watchdog"),
        ("--selector", 'job="a"} or vector(1) or up{job="b"'),
        ("--selector", 'job="a"\nb="c"'),
        ("--runbook-url", "wiki/runbooks.md"),
        ("--runbook-url", "https://wiki.example/runbooks#top"),
    ],
)
def test_print_rules_refuses_what_is_not_a_selector_or_a_runbook_base(option: str, value: str) -> None:
    """A selector that is not label matchers, or a runbook address that is not an http(s) URL without a
    fragment, is a usage error (64) with one line, and nothing is printed."""
    code, out, err = _cli("print-rules", option, value)
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith(f"watchdog: {option} ")


# --- runbooks --------------------------------------------------------------------------------------------------


def _runbook_sections() -> dict[str, str]:
    """docs/runbooks.md's `## ` sections by their GitHub anchor (the heading in lower case, as alert names
    have no spaces or punctuation)."""
    sections = re.split(r"^## ", RUNBOOKS.read_text(), flags=re.MULTILINE)[1:]
    out = {}
    for section in sections:
        heading, _, body = section.partition("\n")
        assert re.fullmatch(r"\w+", heading), f"a runbook heading that is not an alert name: {heading!r}"
        out[heading.lower()] = body
    return out


def test_every_alert_has_a_runbook_url_to_its_own_section() -> None:
    """Every shipped alert's runbook_url is its section of docs/runbooks.md (base, then #<name in lower
    case>), and that section exists, says what it means, what the watchdog saw and the first command."""
    sections = _runbook_sections()
    alerts = _alerts()
    assert len(alerts) == 8
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]
        assert url == runbook_url(rule["alert"]) == f"{RUNBOOK_URL}#{rule['alert'].lower()}"
        anchor = url.partition("#")[2]
        assert anchor in sections, f"{rule['alert']}: no section #{anchor} in docs/runbooks.md"
        body = sections[anchor]
        for part in ("**What it means.**", "**What the watchdog saw.**", "**First command.**", "```sh"):
            assert part in body, (rule["alert"], part)


def test_every_runbook_section_is_an_alert_that_exists() -> None:
    """No stale section: each one names an alert of the shipped rules or of the daemon's Alertmanager
    notifier, and each of the daemon's alerts has one too."""
    names = {rule["alert"] for rule in _alerts()} | set(ALERTNAMES.values())
    assert set(_runbook_sections()) == {name.lower() for name in names}


def test_a_custom_runbook_base_reaches_every_alert() -> None:
    """`--runbook-url` points every alert at the same anchors under another base."""
    base = "https://wiki.example/ops/llm-watchdog"
    code, out, _ = _cli("print-rules", "--runbook-url", base)
    assert code == 0
    urls = {r["alert"]: r["annotations"]["runbook_url"] for r in _rules(out) if "alert" in r}
    assert urls == {name: f"{base}#{name.lower()}" for name in urls}
    assert len(urls) == 8


@pytest.mark.parametrize("value", ["https://wiki.example/runbooks#top", "wiki/runbooks.md"])
def test_the_alertmanager_notifiers_runbook_url_must_be_a_base_url(tmp_path: Path, value: str) -> None:
    """The notifier's `runbook_url` is refused at load (exit 78's ConfigError) unless it is an http(s) URL
    without a fragment: each alert adds its own `#<alertname>`."""
    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.exceptions import ConfigError  # noqa: PLC0415

    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[notifiers.am]\nkind = "alertmanager"\nurl = "http://am:9093"\nrunbook_url = "{value}"\n'
    )
    with pytest.raises(ConfigError, match=r"notifiers\.am\.runbook_url"):
        load_config(config)
    config.write_text(
        '[notifiers.am]\nkind = "alertmanager"\nurl = "http://am:9093"\n'
        'runbook_url = "https://wiki.example/runbooks"\n'
    )
    assert load_config(config).notifiers["am"].options() == {"runbook_url": "https://wiki.example/runbooks"}
