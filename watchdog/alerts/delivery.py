"""Deliver one message over HTTP: a timeout per request, tenacity retries honouring 429 Retry-After."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from watchdog.alerts.alert import Alert
from watchdog.alerts.message import Message, Options, target_url
from watchdog.alerts.notifiers import build_message, secret_values
from watchdog.backoff import AT_LEAST, wait_backoff
from watchdog.exceptions import DeliveryError, TransientDeliveryError
from watchdog.httpclient import create_session, error_reason
from watchdog.vocabulary import (
    DEFAULT_DELIVERY_ATTEMPTS,
    DEFAULT_DELIVERY_BACKOFF,
    DEFAULT_DELIVERY_TIMEOUT,
    DISTRIBUTION,
    version,
)

__all__ = [
    "DEFAULT_MAX_RETRY_AFTER_SECONDS",
    "TransientDeliveryError",
    "deliver",
    "open_client",
    "post_json",
    "redact_url",
    "send",
]

# A receiver asking for a longer pause than this is not waited on here: the delivery fails as transient,
# and the outbox tries again later, so one rate-limited channel never holds a delivery task for an hour.
DEFAULT_MAX_RETRY_AFTER_SECONDS = 60.0
_BACKOFF_CAP_FACTOR = 16
_BODY_EXCERPT_CHARS = 200
# The wait between one delivery's attempts: real time, or the clock of the `Alerting` whose task delivers
# (each of its delivery tasks sets it), so that a manual clock runs a delivery's retries too.
RETRY_SLEEP: ContextVar[Callable[[float], Awaitable[None]]] = ContextVar("retry_sleep", default=anyio.sleep)
_ANSWER_LIMIT = 65536  # bytes of an answer read: its excerpt and a JSON retry_after are at its start


@asynccontextmanager
async def open_client(timeout: float = DEFAULT_DELIVERY_TIMEOUT) -> AsyncIterator[aiohttp.ClientSession]:  # noqa: ASYNC109
    """An HTTP client for deliveries, through the proxy the environment names (HTTPS_PROXY, NO_PROXY...)."""
    async with await create_session(timeout, trust_env=True) as client:
        yield client


async def deliver(
    url: str,
    message: Message,
    *,
    client: aiohttp.ClientSession,
    secrets: Iterable[str] = (),
    timeout: float = DEFAULT_DELIVERY_TIMEOUT,  # noqa: ASYNC109
    attempts: int = DEFAULT_DELIVERY_ATTEMPTS,
    backoff: float = DEFAULT_DELIVERY_BACKOFF,
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER_SECONDS,
    name: str = "",
) -> None:
    """POST `message` to `url` (plus the message's path), retrying what a retry can fix.

    Args:
        url: the configured URL (a secret: no message names more of it than `redact_url` gives).
        message: the body, headers and path.
        client: a client from `open_client` (shared by deliveries).
        secrets: more strings never to show (a routing key, a token in an option).
        timeout: seconds one attempt may take, from connecting to the end of the answer.
        attempts: how many times to try in all.
        backoff: seconds before the first retry (doubled per attempt, plus up to a quarter of jitter).
        max_retry_after: the longest Retry-After honoured; longer asks end the delivery as transient.
        name: what the receiver is, in messages ("webhook" -> "webhook https://host answered ...").

    Raises:
        TransientDeliveryError: still failing after `attempts` tries (network, timeout, 5xx, 429): the
            caller keeps it in the outbox and tries later.
        DeliveryError: refused for good (4xx other than 408/429, a redirect, an invalid URL): sending the
            same request again cannot help.
    """
    shown = redact_url(url)
    where = f"{name} {shown}" if name else shown
    hidden = _secrets(url, secrets)
    if not shown.startswith(("http://", "https://")):
        raise DeliveryError(f"cannot deliver to {where}: only http:// and https:// URLs are supported")
    full = target_url(url, message.path)
    try:
        parts = urlsplit(full.strip())
        _ = parts.port
    except ValueError as exc:
        raise DeliveryError(f"cannot deliver to {where}: invalid URL: {_scrub(str(exc), hidden)}") from exc
    if not parts.hostname:
        raise DeliveryError(f"cannot deliver to {where}: the URL has no host")
    if parts.port == 0:
        raise DeliveryError(f"cannot deliver to {where}: invalid port 0: a port is a number from 1 to 65535")
    body, content_type = message.body()
    headers = {"Content-Type": content_type, "User-Agent": _user_agent(), **message.headers}

    doubled = wait_backoff(first=backoff, cap=backoff * _BACKOFF_CAP_FACTOR, jitter=AT_LEAST)

    def pause(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientDeliveryError) and exc.retry_after is not None:
            return float(exc.retry_after)
        return doubled(state)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=pause,
        retry=retry_if_exception_type(TransientDeliveryError),
        sleep=RETRY_SLEEP.get(),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                await _post_once(
                    client,
                    full,
                    where=where,
                    hidden=hidden,
                    body=body,
                    headers=headers,
                    seconds=timeout,
                    max_retry_after=max_retry_after,
                )
    except _RetryTooLong as exc:
        raise TransientDeliveryError(str(exc), exc.retry_after) from exc
    except TransientDeliveryError as exc:
        # said as what it is: this delivery's attempts; the outbox tries again later (its own log line says so)
        tried = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        raise TransientDeliveryError(f"{exc} ({tried})", exc.retry_after) from exc


class _RetryTooLong(DeliveryError):
    """A 429 asking for a pause longer than this delivery waits: not retried here (left to the outbox)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@functools.cache
def _user_agent() -> str:
    return f"{DISTRIBUTION}/{version()}"


async def _post_once(
    client: aiohttp.ClientSession,
    url: str,
    *,
    where: str,
    hidden: list[str],
    body: bytes,
    headers: Mapping[str, str],
    seconds: float,
    max_retry_after: float,
) -> None:
    try:
        # this bounds the whole attempt (the client's timeout is the client's), so a trickling receiver ends
        with anyio.fail_after(seconds):
            async with client.post(url, data=body, headers=headers, allow_redirects=False) as response:
                status, reason, answer = response.status, response.reason, response.headers
                try:  # its start only: an error page can be any size
                    content = await response.content.readexactly(_ANSWER_LIMIT)
                except asyncio.IncompleteReadError as exc:
                    content = exc.partial
    except TimeoutError as exc:
        raise TransientDeliveryError(f"{where} did not answer within {seconds:g} s") from exc
    except aiohttp.InvalidURL as exc:
        raise DeliveryError(f"cannot deliver to {where}: invalid URL: {_scrub(str(exc), hidden)}") from exc
    except (aiohttp.ClientError, OSError) as exc:  # before ValueError: a certificate's error is one too
        raise TransientDeliveryError(f"cannot reach {where}: {_scrub(error_reason(exc), hidden)}") from exc
    except (ValueError, OverflowError) as exc:
        raise DeliveryError(
            f"cannot deliver to {where}: {type(exc).__name__}: {_scrub(str(exc), hidden)}"
        ) from exc
    if 200 <= status < 300:
        return
    # Scrubbed before it is cut, so a secret split by the cut cannot leak in part.
    text = content.decode("utf-8", errors="replace")
    excerpt = _scrub(" ".join(text.split()), hidden)[:_BODY_EXCERPT_CHARS]
    answered = f"{where} answered HTTP {status} {reason or ''}".rstrip() + (f": {excerpt}" if excerpt else "")
    if status == 429:
        pause = retry_after(answer, content)
        if pause is not None and pause > max_retry_after:
            raise _RetryTooLong(f"{answered}; it asks to wait {pause:g} s: try again later", pause)
        raise TransientDeliveryError(answered, pause)
    if status >= 500 or status == 408:
        raise TransientDeliveryError(answered, retry_after(answer, content) if status == 503 else None)
    if 300 <= status < 400:
        raise DeliveryError(f"{answered}; redirects are not followed: configure the URL it points to")
    if status in {401, 403, 404, 410}:
        raise DeliveryError(f"{answered}; check that the URL and its token are current")
    raise DeliveryError(f"{answered}; the receiver refused this message and will refuse it again")


def retry_after(headers: Mapping[str, str], content: bytes) -> float | None:
    """The pause a 429/503 answer asks for: Retry-After (seconds or an HTTP date), or the JSON
    `retry_after` of Discord and `parameters.retry_after` of Telegram in its body, `content`."""
    header = headers.get("Retry-After", "").strip()
    if header:
        try:
            value = float(header)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(header)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None and when.tzinfo is not None:
                return max(0.0, when.timestamp() - time.time())
        else:
            if math.isfinite(value):
                return max(0.0, value)
    try:
        data = json.loads(content[:4096]) if content else None
    except ValueError:
        return None
    if isinstance(data, dict):
        params = data.get("parameters")
        asked: list[object] = [
            data.get("retry_after"),
            params.get("retry_after") if isinstance(params, dict) else None,
        ]
        for item in asked:
            if isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item):
                return max(0.0, float(item))
    return None


def _secrets(url: str, extra: Iterable[str]) -> list[str]:
    parts = urlsplit(url.strip())
    out = [url, url.strip(), parts.path + "?" + parts.query, parts.path, parts.query, parts.fragment]
    if parts.netloc != parts.netloc.rpartition("@")[2]:
        out.append(parts.netloc.rpartition("@")[0])
    # a token is often one path segment (Telegram's bot<token>, a Slack or Discord webhook's last part)
    out.extend(seg for seg in parts.path.split("/") if len(seg) >= 8)
    out.extend(s for s in extra if s)
    return sorted({s for s in out if len(s) > 1}, key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    """Remove every secret from text an HTTP library or a receiver produced."""
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return text


def redact_url(url: str) -> str:
    """`scheme://host[:port]` of `url` (`<invalid URL>` without them), the only part of a webhook URL that is
    not a secret: chat webhooks carry their token in the path (Slack, Discord, Telegram) or the query (Google
    Chat), and some URLs carry `user:password@`."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "<invalid URL>"
    hostport = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not hostport:
        return "<invalid URL>"
    return f"{parts.scheme.lower()}://{hostport}"


async def post_json(
    url: str,
    payload: Mapping[str, Any],
    *,
    # The timeout bounds each attempt, not the whole delivery with its backoff: a caller's fail_after cannot.
    timeout: float = DEFAULT_DELIVERY_TIMEOUT,  # noqa: ASYNC109
    attempts: int = DEFAULT_DELIVERY_ATTEMPTS,
    backoff: float = DEFAULT_DELIVERY_BACKOFF,
) -> None:
    """POST `payload` as UTF-8 JSON to `url` (`watch --notify`), retried as `deliver` retries (its arguments).

    Raises:
        DeliveryError: not delivered, whatever the reason (the only exception a delivery raises; a
            `TransientDeliveryError` is one).
        TypeError: `payload` is not JSON-serializable (a bug in the caller, not a delivery failure).
    """
    message = Message(json=payload)
    message.body()  # a payload that is not JSON is the caller's bug: TypeError before any network
    async with open_client(timeout) as client:
        await deliver(
            url, message, client=client, timeout=timeout, attempts=attempts, backoff=backoff, name="webhook"
        )


async def send(
    kind: str,
    url: str,
    alert: Alert,
    *,
    client: aiohttp.ClientSession,
    options: Options | None = None,
    timeout: float = DEFAULT_DELIVERY_TIMEOUT,  # noqa: ASYNC109
    attempts: int = DEFAULT_DELIVERY_ATTEMPTS,
    backoff: float = DEFAULT_DELIVERY_BACKOFF,
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER_SECONDS,
) -> bool:
    """Lay out `alert` for `kind` and POST it to `url`, retrying what can be retried.

    Returns:
        True when delivered, False when the service takes nothing for this kind of alert.

    Raises:
        TransientDeliveryError: still failing after `attempts` (keep it in the outbox, try later).
        DeliveryError: refused for good, or misconfigured. No message names more of the URL than
            `scheme://host[:port]`, nor any secret option.
    """
    options = options or {}
    message = build_message(kind, alert, options)
    if message is None:
        return False
    await deliver(
        url,
        message,
        client=client,
        secrets=secret_values(options),
        timeout=timeout,
        attempts=attempts,
        backoff=backoff,
        max_retry_after=max_retry_after,
    )
    return True
