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
