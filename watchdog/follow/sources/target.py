"""Parse a TARGET argument: a local path, `ssh://[user@]host[:port]/path`, `[user@]host:/path`, `-`, or a kind's URL
(`docker://`, `podman://`, `journald://`, `k8s://`: watchdog.follow.sources.kinds)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from watchdog.exceptions import UsageError
from watchdog.follow.sources.kinds import KINDS, STDIN
from watchdog.vocabulary import is_ssh_word, remote_relative

_FORMS = "a local path, ssh://[user@]host[:port]/path, [user@]host:/path, - (standard input), " + ", ".join(
    k.form for k in KINDS.values() if k.form
)
# scp-like: no slash before the first colon; an IPv6 host is written in brackets.
_SCP = re.compile(r"^(?:(?P<user>[^@/:]*)@)?(?P<host>\[[^\]/]*\]|[^@/:\[\]]*):(?P<path>.*)$", re.DOTALL)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class Target:
    """Where a log lives: `host` is None on this machine; `kind` a key of `KINDS`; `path` the kind's name for what
    is followed (a file's path, a container, a unit or `identifier=NAME`, `NAMESPACE/POD[/CONTAINER]`);
    `context` a Kubernetes target's kubeconfig context (None: the current one)."""

    host: str | None
    user: str | None
    port: int | None
    path: str
    kind: str = "file"
    context: str | None = None

    @property
    def is_remote(self) -> bool:
        """Whether it is reached over SSH."""
        return self.host is not None

    def __str__(self) -> str:
        if self.kind == STDIN:
            return "-"
        if self.kind == "k8s":
            return f"k8s://{self.context}/{self.path}" if self.context else f"k8s://{self.path}"
        scheme = "ssh" if self.kind == "file" else self.kind
        if self.host is None:
            return self.path if self.kind == "file" else f"{scheme}://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        path = self.path if self.path.startswith("/") or self.kind != "file" else f"/~/{self.path}"
        return f"{scheme}://{user}{host}{port}{'' if path.startswith('/') else '/'}{path}"


def _check_host(host: str, text: str) -> str:
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise UsageError(f"target {text!r} has no host; expected {_FORMS}")
    if not is_ssh_word(host):
        raise UsageError(f"target {text!r}: {host!r} is not a valid host name or address")
    return host


def _check_user(user: str | None, text: str) -> str | None:
    if user is None:
        return None
    if not is_ssh_word(user):
        raise UsageError(f"target {text!r}: {user!r} is not a valid user name")
    return user


def _remote_path(path: str, text: str) -> str:
    path = remote_relative(path)  # the remote command runs in the user's home directory
    if not path or path.endswith("/"):
        raise UsageError(f"target {text!r} names no file; expected {_FORMS}")
    if "\0" in path or "\n" in path:
        raise UsageError(f"target {text!r}: the path may not contain NUL or newline characters")
    return path


def _parse_name(name: str, text: str, noun: str) -> str:
    if not name or "\0" in name or "\n" in name or name.startswith("-"):
        raise UsageError(
            f"target {text!r} names no {noun} (or one that cannot be passed safely); expected {_FORMS}"
        )
    return name


def _parse_kind(kind: str, rest: str, text: str) -> Target:
    # SCHEME://NAME on this machine, SCHEME://[user@]host[:port]/NAME on an SSH host; k8s://[CONTEXT/]NS/POD[/C]
    spec = KINDS[kind]
    if kind == "k8s":
        from watchdog.follow.sources.podref import split_pod_target  # noqa: PLC0415 - only for a pod

        context, path = split_pod_target(unquote(rest))
        return Target(None, None, None, path, kind=kind, context=context)
    if "/" not in rest:
        return Target(None, None, None, _parse_name(unquote(rest), text, spec.noun), kind=kind)
    host, user, port, path = _split_url(f"ssh://{rest}", text)
    return Target(host, user, port, _parse_name(path[1:], text, spec.noun), kind=kind)


def _split_url(text: str, said: str) -> tuple[str, str | None, int | None, str]:
    # host, user, port and the path (decoded) of `scheme://[user@]host[:port]/path`; `said`: the target as given
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"target {said!r}: {exc}; expected {_FORMS}") from exc
    if parts.password is not None:
        raise UsageError(f"target {said!r}: passwords in the URL are not supported; use a key or the agent")
    if parts.query or parts.fragment:
        raise UsageError(f"target {said!r}: '?' and '#' are not allowed in a target")
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.startswith("["):
        host_text = netloc[: netloc.index("]") + 1] if "]" in netloc else netloc
    else:
        host_text = netloc.partition(":")[0]
    host = _check_host(unquote(host_text), said)
    user = _check_user(unquote(parts.username) if parts.username is not None else None, said)
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"target {said!r}: port {port} is out of range 1-65535")
    return host, user, port, unquote(parts.path)


def _parse_url(text: str) -> Target:
    host, user, port, raw_path = _split_url(text, text)
    if raw_path.startswith("/~"):
        raw_path = raw_path[1:]
    return Target(host=host, user=user, port=port, path=_remote_path(raw_path, text))


def parse_target(text: str) -> Target:
    """Parse a TARGET string from the command line or a config file.

    Args:
        text: a local path (anything starting with "/" or ".", or with no ":" before a "/"),
            `ssh://[user@]host[:port]/path` (percent-escapes decoded), the scp-like
            `[user@]host:/path` (`host:path` is relative to the remote home directory), `-` (standard
            input), or a kind's URL: `docker://CONTAINER`, `docker://[user@]host[:port]/CONTAINER` (and
            `podman://`), `journald://UNIT` (or `identifier=NAME`), `k8s://NAMESPACE/POD[/CONTAINER]`,
            `k8s://CONTEXT/NAMESPACE/POD/CONTAINER`.

    Returns:
        The parsed target; `host` is None on this machine.

    Raises:
        UsageError: the string is empty or malformed; the message says what is expected.
    """
    if not text or not text.strip():
        raise UsageError(f"empty target; expected {_FORMS}")
    if "\0" in text:
        raise UsageError("the target may not contain NUL characters")
    if text == "-":
        return Target(None, None, None, "-", kind=STDIN)
    if text.lower().startswith("ssh://"):
        return _parse_url(text)
    scheme = _SCHEME.match(text)
    if scheme is not None:
        kind = scheme[1].lower()
        if kind not in KINDS or KINDS[kind].form is None:
            raise UsageError(f"target {text!r}: unsupported scheme {scheme[1]!r}; expected {_FORMS}")
        return _parse_kind(kind, text[scheme.end() :], text)
    if text.startswith(("/", ".", "~")):
        return Target(host=None, user=None, port=None, path=text)
    match = _SCP.match(text)
    if match is None:
        return Target(host=None, user=None, port=None, path=text)
    host = _check_host(match["host"], text)
    user = _check_user(match["user"], text)
    return Target(host=host, user=user, port=None, path=_remote_path(match["path"], text))
