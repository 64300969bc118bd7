"""A real HTTP receiver on 127.0.0.1 for the alert tests: answers from a script, records every request."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from aiohttp import web

SECRET_PATH = "/services/T0SECRET/B0SECRET/XyZsecretToken123"


@dataclass
class Got:
    """One request as the receiver saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None  # what it answered (None: still answering, or hanging)

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


@dataclass
class Answer:
    """A scripted answer: a status, headers, a body; `hang` never answers (until the test ends)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "ok"
    hang: bool = False


@dataclass
class Receiver:
    """A real aiohttp server on 127.0.0.1 that answers from a script and records every request."""

    port: int = 0
    scheme: str = "http"
    script: list[Answer] = field(default_factory=list)
    got: list[Got] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def url(self, path: str = SECRET_PATH) -> str:
        """This receiver's URL with a secret-looking path."""
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def delivered(self) -> list[Got]:
        """The requests it answered with a 2xx."""
        return [g for g in self.got if g.status is not None and 200 <= g.status < 300]

    async def wait_for(self, count: int, deadline: float = 20.0) -> list[Got]:
        """Wait (at most `deadline` seconds) until it answered `count` requests with a 2xx."""
        return await self.wait_until(lambda got: len(got) >= count, deadline)

    async def wait_until(self, predicate: Callable[[list[Got]], bool], deadline: float = 20.0) -> list[Got]:
        """Wait (at most `deadline` seconds) until `predicate(self.delivered())` holds."""
        with anyio.fail_after(deadline):
            while not predicate(self.delivered()):
                changed = self.changed
                await changed.wait()
        return self.delivered()

    async def handle(self, request: web.Request) -> web.Response:
        got = Got(request.method, request.path_qs, dict(request.headers), await request.read())
        self.got.append(got)
        answer = self.script.pop(0) if self.script else Answer()
        if answer.hang:
            await self.release.wait()
        got.status = answer.status
        self.changed.set()
        self.changed = anyio.Event()
        return web.Response(status=answer.status, headers=answer.headers, text=answer.body)


@asynccontextmanager
async def running_receiver(port: int = 0, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Receiver]:
    """A receiver listening on `port` (0: an ephemeral one) until the block ends; https with `tls`."""
    state = Receiver(scheme="https" if tls else "http")
    app = web.Application(client_max_size=1 << 22)
    app.router.add_route("*", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls)
    await site.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 (its own CA) and its key, written in `directory`: their paths."""
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path
