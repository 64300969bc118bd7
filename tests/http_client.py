"""An HTTP client for the tests: aiohttp's (urllib's where the test is not async), each answer read whole."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp


@dataclass(frozen=True)
class Answer:
    """An answer read whole: its status, its headers (any case), its body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        """The body as UTF-8."""
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.content)


class Client:
    """`async with Client("http://127.0.0.1:9469") as client: (await client.get("/status")).json()`.

    Redirects are not followed; `raw`: bodies as they came on the wire (gzip not undone); `ssl`: the TLS
    context to trust servers by (default: the system's).
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        timeout: float = 10.0,
        ssl: ssl.SSLContext | None = None,
        raw: bool = False,
    ) -> None:
        self.base_url = base_url
        self._timeout, self._ssl, self._raw = timeout, ssl, raw
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True),
            timeout=aiohttp.ClientTimeout(total=self._timeout),
            auto_decompress=not self._raw,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._session is not None
        await self._session.close()

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> Answer:
        """`method` `url` (after the base URL), read whole."""
        assert self._session is not None, "use the client within `async with`"
        async with self._session.request(
            method, self.base_url + url, params=params, headers=headers, json=json, allow_redirects=False
        ) as response:
            return Answer(response.status, response.headers, await response.read())

    async def get(
        self, url: str, *, params: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None
    ) -> Answer:
        """GET `url` (after the base URL)."""
        return await self.request("GET", url, params=params, headers=headers)

    async def post(self, url: str, *, json: Any = None, headers: Mapping[str, str] | None = None) -> Answer:
        """POST `json` to `url` (after the base URL)."""
        return await self.request("POST", url, json=json, headers=headers)


def get(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 10.0) -> Answer:
    """GET `url` from code that is not async: the body as it came on the wire."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.headers, exc.read())
