"""The Prometheus rules for the daemon's metrics, rendered for a selector from the templates
`daemon/rules/*.yml` (`%(selector)s`, `%(runbook_url)s`): `watchdog print-rules` (docs/deploy.md)."""

from __future__ import annotations

import re
from importlib import resources

from watchdog.exceptions import UsageError
from watchdog.vocabulary import RUNBOOK_URL

DEFAULT_SELECTOR = 'job="watchdog"'  # the scrape job of deploy/prometheus/prometheus.yml and deploy/k8s
RULE_FILES = ("watchdog-alerts.yml", "watchdog-recording.yml")  # as deploy/prometheus/rules/ names them
_GROUPS = ("watchdog-recording.yml", "watchdog-alerts.yml")  # their order in one file: recording first
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_MATCHER = rf"[ \t]*[A-Za-z_]\w*[ \t]*(?:=~|!~|!=|=)[ \t]*{_STRING}[ \t]*"
_SELECTOR = re.compile(rf"{_MATCHER}(?:,{_MATCHER})*")
_URL = re.compile(r"https?://[^\s\"'#<>%]+")
_COMBINED_HEADER = """\
# The watchdog's recording and alerting rules for Prometheus (docs/contracts.md, "Metrics"; each alert's
# runbook_url is its section of docs/runbooks.md). Rendered by `watchdog print-rules` for the selector
# {selector}.
"""
_K8S_HEADER = """\
# The rules of deploy/prometheus/rules/ for the Prometheus Operator (kube-prometheus-stack), as one
# PrometheusRule. Generated: `watchdog print-rules --kubernetes` (with --selector for another job than
# "watchdog"); tests/test_promrules.py checks it is that output. The operator's Prometheus must select it
# (by default kube-prometheus-stack's ruleSelector wants the label `release: <its release name>`: add it).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: watchdog
  labels:
    app.kubernetes.io/name: watchdog
spec:
"""


def check_selector(selector: str) -> str:
    """`selector` if it is PromQL label matchers (`job="x"`, `job=~"a|b",cluster="eu1"`), stripped.

    Raises:
        UsageError: anything else (an empty selector would match every series of every job).
    """
    if not _SELECTOR.fullmatch(selector):
        raise UsageError(
            f"--selector {selector!r} is not PromQL label matchers: give e.g. 'job=\"llm-watchdog\"' "
            "(name, one of = != =~ !~, a double-quoted value; several joined by commas)"
        )
    return selector.strip()


def check_runbook_url(url: str) -> str:
    """`url` if it is an http(s) URL without a fragment (each alert adds its own `#anchor`).

    Raises:
        UsageError: anything else.
    """
    if not _URL.fullmatch(url):
        raise UsageError(
            f"--runbook-url {url!r} is not an http(s) URL without spaces, quotes or a #fragment: give the "
            "address of docs/runbooks.md where your team reads it"
        )
    return url


def rule_file(name: str, selector: str = DEFAULT_SELECTOR, runbook_url: str = RUNBOOK_URL) -> str:
    """The rule file `name` (one of RULE_FILES) rendered for `selector`, as YAML text with its comments."""
    values = {"selector": check_selector(selector), "runbook_url": check_runbook_url(runbook_url)}
    text = (resources.files(__package__) / "rules" / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"%({key})s", value)
    assert "%(" not in text, f"a placeholder of {name} has no value"
    return text


def rule_files(selector: str = DEFAULT_SELECTOR, runbook_url: str = RUNBOOK_URL) -> dict[str, str]:
    """Each file of deploy/prometheus/rules/ by name, rendered for `selector`."""
    return {name: rule_file(name, selector, runbook_url) for name in RULE_FILES}


def _groups(selector: str, runbook_url: str) -> str:
    """The `groups:` list items of every rule file, recording first (YAML text at indentation 2)."""
    parts = []
    for name in _GROUPS:
        _head, sep, groups = rule_file(name, selector, runbook_url).partition("\ngroups:\n")
        assert sep, f"{name} has no top-level groups:"
        parts.append(groups.rstrip("\n") + "\n")
    return "\n".join(parts)


def combined(selector: str = DEFAULT_SELECTOR, runbook_url: str = RUNBOOK_URL) -> str:
    """Every rule group in one Prometheus rule file (what `watchdog print-rules` prints)."""
    return _COMBINED_HEADER.format(selector=selector.strip()) + "groups:\n" + _groups(selector, runbook_url)


def prometheus_rule(selector: str = DEFAULT_SELECTOR, runbook_url: str = RUNBOOK_URL) -> str:
    """Every rule group as a `monitoring.coreos.com/v1` PrometheusRule (deploy/k8s/prometheusrule.yaml)."""
    groups = "".join(
        f"  {line}" if line.strip() else line for line in _groups(selector, runbook_url).splitlines(True)
    )
    return _K8S_HEADER + "  groups:\n" + groups
