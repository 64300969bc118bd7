"""Host key policy: known_hosts checking, refusing unknown or changed keys, accept-new."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from watchdog.follow.sources.asyncssh_quiet import asyncssh

_DEFAULT_PORT = 22


def known_hosts_pattern(host: str, port: int | None) -> str:
    """How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22."""
    if port is None or port == _DEFAULT_PORT:
        return host
    return f"[{host}]:{port}"


class HostKeyCheck:
    """The host key decision for one connection attempt.

    asyncssh asks `trusted_keys` which keys known_hosts holds for the host, and calls `validate`
    only for a key that is not among them: then the key is either unknown (the file has no entry
    for the host) or changed (it has one, for another key). `problem` keeps the message for the
    refusal, which asyncssh reports as a bare HostKeyNotVerifiable.
    """

    def __init__(self, path: str, *, accept_new: bool) -> None:
        """Remember the policy; `load` reads the file (call it off the event loop before connecting), else
        it is read when asyncssh asks for the trusted keys."""
        self.path = path
        self.accept_new = accept_new
        self.problem: str | None = None
        self._has_entry = False
        self._known: asyncssh.SSHKnownHosts | None = None

    def load(self) -> None:
        """Read known_hosts now (blocking: from a worker thread), so that asyncssh's question is answered
        without file I/O on the event loop."""
        try:
            self._known = asyncssh.read_known_hosts(self.path)
        except FileNotFoundError:
            self._known = asyncssh.import_known_hosts("")

    def trusted_keys(
        self, host: str, addr: str, port: int | None
    ) -> tuple[Sequence[asyncssh.SSHKey], Sequence[asyncssh.SSHKey], Sequence[asyncssh.SSHKey]]:
        """The host keys, CA keys and revoked keys known_hosts holds for the host."""
        if self._known is None:
            self.load()
        assert self._known is not None
        host_keys, ca_keys, revoked, *_ = asyncssh.match_known_hosts(self._known, host, addr, port)
        self._has_entry = bool(host_keys) or bool(ca_keys)
        return host_keys, ca_keys, revoked

    def validate(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Decide on a key that known_hosts does not list for the host."""
        name = known_hosts_pattern(host, port)
        fingerprint = f"{key.get_algorithm()} {key.get_fingerprint()}"
        if self._has_entry:
            self.problem = (
                f"REMOTE HOST KEY CHANGED for {name}: it offered {fingerprint}, which is not the key "
                f"recorded in {self.path}. Someone may be intercepting the connection, or the host was "
                "reinstalled. If the change is expected, remove the old key with "
                f"`ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(self.path)}` and connect again."
            )
            return False
        if not self.accept_new:
            port_flag = f"-p {port} " if port != _DEFAULT_PORT else ""
            self.problem = (
                f"unknown host key for {name} ({fingerprint}): it is not in {self.path}. Check the "
                "fingerprint with the host's owner, then record it with "
                f"`ssh-keyscan {port_flag}{shlex.quote(host)} >> {shlex.quote(self.path)}` "
                "(or connect once with ssh), or let a new key be recorded: `watchdog watch "
                "--accept-new-host-key`, or `accept_new_host_key = true` in the host's [hosts.NAME] table."
            )
            return False
        self._append(name, key)
        return True

    def _append(self, name: str, key: asyncssh.SSHKey) -> None:
        algorithm, blob = key.export_public_key("openssh").decode().split()[:2]
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        # A small synchronous append from asyncssh's callback, which cannot await.
        with open(self.path, "a+b") as file:
            file.seek(0, os.SEEK_END)
            if file.tell() > 0:
                file.seek(-1, os.SEEK_END)
                if file.read(1) != b"\n":
                    file.write(b"\n")
            file.write(f"{name} {algorithm} {blob}\n".encode())
