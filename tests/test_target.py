"""Tests for watchdog.follow.sources.target: TARGET strings to `Target`."""

from __future__ import annotations

import pytest

from watchdog.exceptions import UsageError
from watchdog.follow.sources.target import Target, parse_target


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("/var/log/x.log", Target(None, None, None, "/var/log/x.log"), id="absolute"),
        pytest.param("./x.log", Target(None, None, None, "./x.log"), id="relative-dot"),
        pytest.param("x.log", Target(None, None, None, "x.log"), id="bare-name"),
        pytest.param("/data/a:b.log", Target(None, None, None, "/data/a:b.log"), id="abs-with-colon"),
        pytest.param("./a:b.log", Target(None, None, None, "./a:b.log"), id="dot-with-colon"),
        pytest.param("logs/a:b.log", Target(None, None, None, "logs/a:b.log"), id="slash-before-colon"),
        pytest.param("gpu1:/data/x.log", Target("gpu1", None, None, "/data/x.log"), id="scp-host"),
        pytest.param("root@gpu1:/data/x.log", Target("gpu1", "root", None, "/data/x.log"), id="scp-user"),
        pytest.param("gpu1:logs/x.log", Target("gpu1", None, None, "logs/x.log"), id="scp-relative"),
        pytest.param("gpu1:~/x.log", Target("gpu1", None, None, "x.log"), id="scp-home"),
        pytest.param("me@[::1]:/x.log", Target("::1", "me", None, "/x.log"), id="scp-ipv6"),
        pytest.param("10.1.2.3:/x:y.log", Target("10.1.2.3", None, None, "/x:y.log"), id="scp-ip"),
        pytest.param("ssh://gpu1/data/x.log", Target("gpu1", None, None, "/data/x.log"), id="url"),
        pytest.param(
            "ssh://root@gpu1:2222/data/x.log", Target("gpu1", "root", 2222, "/data/x.log"), id="url-full"
        ),
        pytest.param("ssh://u@[::1]:22/x.log", Target("::1", "u", 22, "/x.log"), id="url-ipv6"),
        pytest.param("SSH://gpu1/a%20b.log", Target("gpu1", None, None, "/a b.log"), id="url-escapes"),
        pytest.param("ssh://gpu1/~/x.log", Target("gpu1", None, None, "x.log"), id="url-home"),
    ],
)
def test_parse_target(text: str, expected: Target) -> None:
    """Each accepted TARGET form parses to the host, user, port and path it names."""
    assert parse_target(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "empty target", id="empty"),
        pytest.param("   ", "empty target", id="blank"),
        pytest.param("ssh://gpu1", "names no file", id="url-no-path"),
        pytest.param("ssh://gpu1/", "names no file", id="url-root-dir"),
        pytest.param("ssh:///x.log", "no host", id="url-no-host"),
        pytest.param("ssh://gpu1:99999/x.log", "out of range", id="url-bad-port"),
        pytest.param("ssh://gpu1:abc/x.log", "expected", id="url-port-not-number"),
        pytest.param("ssh://u:pw@gpu1/x.log", "passwords", id="url-password"),
        pytest.param("ssh://gpu1/x.log?a=1", "not allowed", id="url-query"),
        pytest.param("http://gpu1/x.log", "unsupported scheme", id="other-scheme"),
        pytest.param("gpu1:", "names no file", id="scp-no-path"),
        pytest.param(":/x.log", "no host", id="scp-no-host"),
        pytest.param("@gpu1:/x.log", "not a valid user", id="scp-empty-user"),
        pytest.param("-oProxyCommand=x:/x.log", "not a valid host", id="scp-option-injection"),
        pytest.param("gpu1:/x\n.log", "newline", id="newline"),
    ],
)
def test_parse_target_rejects(text: str, message: str) -> None:
    """Malformed TARGET strings raise UsageError with a message that says what is wrong."""
    with pytest.raises(UsageError, match=message):
        parse_target(text)


def test_target_str_round_trips() -> None:
    """A remote target prints as an ssh:// URL that parses back to the same target."""
    for text in ["root@gpu1:/data/x.log", "ssh://u@[::1]:2222/x.log", "gpu1:logs/x.log"]:
        target = parse_target(text)
        assert target.is_remote
        assert parse_target(str(target)) == target
    assert str(parse_target("/x.log")) == "/x.log"
    assert not parse_target("/x.log").is_remote


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("-", Target(None, None, None, "-", kind="stdin"), id="stdin"),
        pytest.param("docker://vllm", Target(None, None, None, "vllm", kind="docker"), id="docker-local"),
        pytest.param(
            "docker://root@gpu1:2222/vllm",
            Target("gpu1", "root", 2222, "vllm", kind="docker"),
            id="docker-ssh",
        ),
        pytest.param(
            "podman://gpu1/sglang", Target("gpu1", None, None, "sglang", kind="podman"), id="podman"
        ),
        pytest.param(
            "journald://sglang.service",
            Target(None, None, None, "sglang.service", kind="journald"),
            id="unit",
        ),
        pytest.param(
            "journald://gpu1/identifier=vllm",
            Target("gpu1", None, None, "identifier=vllm", kind="journald"),
            id="identifier-ssh",
        ),
        pytest.param("k8s://llm/vllm-0", Target(None, None, None, "llm/vllm-0", kind="k8s"), id="pod"),
        pytest.param(
            "k8s://llm/vllm-0/server",
            Target(None, None, None, "llm/vllm-0/server", kind="k8s"),
            id="container",
        ),
        pytest.param(
            "k8s://prod/llm/vllm-0/server",
            Target(None, None, None, "llm/vllm-0/server", kind="k8s", context="prod"),
            id="context",
        ),
        pytest.param(
            "k8s://arn:aws:eks:us-east-1:1:cluster/gpu/llm/vllm-0/server",
            Target(
                None,
                None,
                None,
                "llm/vllm-0/server",
                kind="k8s",
                context="arn:aws:eks:us-east-1:1:cluster/gpu",
            ),
            id="eks-context",
        ),
    ],
)
def test_parse_kind_targets(text: str, expected: Target) -> None:
    """Standard input and each kind's URL parse into the kind, the host if any, and the name it follows, and
    print back as given."""
    assert parse_target(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("docker://", "names no container", id="no-container"),
        pytest.param("docker://gpu1/", "names no container", id="host-no-container"),
        pytest.param("docker://gpu1/-it", "names no container", id="option-like"),
        pytest.param("k8s://pod-only", "expected NAMESPACE/POD", id="k8s-one-part"),
        pytest.param("k8s://llm/Vllm_0", "not a valid pod name", id="k8s-bad-name"),
        pytest.param("s3://bucket/log", "unsupported scheme 's3'", id="unknown-scheme"),
    ],
)
def test_parse_kind_targets_rejects(text: str, message: str) -> None:
    """A kind's URL that names nothing, or something that could pass for an option, is refused with the forms."""
    with pytest.raises(UsageError, match=message):
        parse_target(text)
