"""The registry of source kinds: what each follows, how a target and a launch's config name it, its module.

Adding a kind is one module (with `source(target, pool) -> Source`) and one row here: the target parser, the
config and the follower (`open.open_source`) all read this table. A kind's module is imported only when a
target of it is followed (the SSH and container modules pull in what a plain file does not need).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FILE", "KINDS", "STDIN", "Kind"]

FILE = "file"
STDIN = "stdin"


@dataclass(frozen=True)
class Kind:
    """One kind of source: its name (a target's URL scheme too), its module under `watchdog.follow.sources`, the
    `[launches.X]` key that names it, whether it may live on an SSH host, and its words for people."""

    name: str
    module: str
    config_key: str | None  # None: not in the config (standard input)
    remote: bool
    noun: str  # what the target names: "log", "container", ...
    form: str | None  # its target forms, for messages; None: not a URL
    resumes: str  # how it resumes after a cut or a restart of the daemon, for the docs


KINDS: Mapping[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            FILE, "files", "log", True, "log", None, "at the byte offset, the file checked by its first bytes"
        ),
        Kind(STDIN, "stdin", None, False, "input", None, "not at all: a pipe is read once, to its end"),
        Kind(
            "docker",
            "docker",
            "container",
            True,
            "container",
            "docker://CONTAINER, docker://[user@]host[:port]/CONTAINER",
            "after the last line's timestamp; a re-created container is read from its start",
        ),
        Kind(
            "podman",
            "docker",
            "container",
            True,
            "container",
            "podman://CONTAINER, podman://[user@]host[:port]/CONTAINER",
            "after the last line's timestamp; a re-created container is read from its start",
        ),
        Kind(
            "journald",
            "journald",
            "unit",
            True,
            "unit",
            "journald://UNIT, journald://[user@]host[:port]/UNIT (UNIT or identifier=NAME)",
            "after the journal cursor of the last entry read",
        ),
        Kind(
            "k8s",
            "k8s",
            "pod",
            False,
            "pod",
            "k8s://NAMESPACE/POD[/CONTAINER], k8s://CONTEXT/NAMESPACE/POD/CONTAINER",
            "after the last line's timestamp (sinceTime); a new pod is read from its start",
        ),
    )
}
