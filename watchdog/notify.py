"""Deliver a JSON notification to a webhook URL over HTTP, with retries, never revealing the URL's secret."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from watchdog.exceptions import DeliveryError

__all__ = [
    "DEFAULT_ATTEMPTS",
    "DEFAULT_BACKOFF_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "post_json",
    "redact_url",
]

DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_ATTEMPTS = 3
DEFAULT_BACKOFF_SECONDS = 0.5
# The backoff doubles per attempt up to this many times its first value, plus up to one first value of jitter.
_BACKOFF_CAP_FACTOR = 16

# How much of a refusing receiver's answer goes into the message: enough for Slack's "no_service".
_BODY_EXCERPT_CHARS = 200


class _TransientDeliveryError(DeliveryError):
    """A failure worth retrying within this delivery: a network error, a timeout, a 5xx or a 429."""


def redact_url(url: str) -> str:
    """Reduce a URL to `scheme://host[:port]`, the only part of a webhook URL that is not a secret.

    Chat webhooks carry their token in the path (Slack, Discord, Telegram) or the query (Google Chat), and
    some URLs carry `user:password@`; all of it is dropped.

    Args:
        url: any string.

    Returns:
        `scheme://host[:port]`, or `<invalid URL>` when `url` has no scheme and host.
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "<invalid URL>"
    hostport = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not hostport:
        return "<invalid URL>"
    return f"{parts.scheme.lower()}://{hostport}"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every delivery, built once: building one costs tens of milliseconds, which a
    watcher pays at start-up (see `watch`), not between its verdict and the webhook."""
    return ssl.create_default_context()


async def post_json(
    url: str,
    payload: Mapping[str, Any],
    *,
    # The timeout bounds each attempt, not the whole delivery with its backoff: a caller's fail_after cannot.
    timeout: float = DEFAULT_TIMEOUT_SECONDS,  # noqa: ASYNC109
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: float = DEFAULT_BACKOFF_SECONDS,
) -> None:
    """POST `payload` as a JSON body to an http:// or https:// URL.

    Network errors, timeouts, 5xx and 429 answers are retried with exponential backoff and jitter; other
    non-2xx answers are not, since sending the same request again cannot change them. Error messages
    name the receiver by `redact_url(url)` only.

    Args:
        url: the webhook URL (a secret: it never appears in messages).
        payload: a JSON-serializable mapping, sent as UTF-8 JSON.
        timeout: seconds one attempt may take, from connecting to the end of the answer.
        attempts: how many times to try in all.
        backoff: seconds before the first retry; 0 retries at once.

    Raises:
        DeliveryError: the URL is not http(s) or is invalid (no host, a bad port), the receiver answered
            non-2xx, or it could not be reached within `attempts` tries (refused, DNS, TLS, timeout). This
            is the only exception a delivery raises, so a caller can treat any failure as "not delivered".
        TypeError: `payload` is not JSON-serializable (a bug in the caller, not a delivery failure).
    """
    where = redact_url(url)
    if not where.startswith(("http://", "https://")):
        raise DeliveryError(
            f"cannot deliver to {where}: only http:// and https:// webhook URLs are supported"
        )
    _check_url(url, where)
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": _user_agent()}
    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        # Composed, not wait_exponential_jitter, whose arguments changed between tenacity 8 and 9.
        wait=wait_exponential(multiplier=backoff, max=backoff * _BACKOFF_CAP_FACTOR)
        + wait_random(0, backoff),
        retry=retry_if_exception_type(_TransientDeliveryError),
        sleep=anyio.sleep,
        reraise=True,
    )
    try:
        async with httpx.AsyncClient(follow_redirects=False, timeout=timeout, verify=tls_context()) as client:
            async for attempt in retrying:
                with attempt:
                    await _post_once(client, url, where=where, body=body, headers=headers, seconds=timeout)
    except _TransientDeliveryError as exc:
        raise DeliveryError(f"{exc}; gave up after {attempts} attempts") from exc


async def _post_once(
    client: httpx.AsyncClient,
    url: str,
    *,
    where: str,
    body: bytes,
    headers: Mapping[str, str],
    seconds: float,
) -> None:
    try:
        # httpx's timeout bounds each read; this bounds the whole attempt, so a trickling receiver ends too.
        with anyio.fail_after(seconds):
            response = await client.post(url, content=body, headers=headers)
    except TimeoutError as exc:
        raise _TransientDeliveryError(f"webhook {where} did not answer within {seconds:g} s") from exc
    except httpx.TransportError as exc:
        raise _TransientDeliveryError(
            f"cannot reach webhook {where}: {type(exc).__name__}: {_scrub(str(exc), url)}"
        ) from exc
    except OSError as exc:  # below httpx: a socket error it did not wrap
        raise _TransientDeliveryError(
            f"cannot reach webhook {where}: {type(exc).__name__}: {_scrub(str(exc), url)}"
        ) from exc
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, OverflowError, ExceptionGroup) as exc:
        # ValueError, OverflowError, ExceptionGroup: what the socket layer raises for an address it cannot
        # use (an ExceptionGroup holds only Exceptions, so a cancellation is never caught here).
        raise DeliveryError(
            f"cannot deliver to webhook {where}: {type(exc).__name__}: {_scrub(str(exc), url)}"
        ) from exc
    if response.is_success:
        return
    status = response.status_code
    # Scrubbed before it is cut, so a secret split by the cut cannot leak in part.
    excerpt = _scrub(" ".join(response.text.split()), url)[:_BODY_EXCERPT_CHARS]
    answered = f"webhook {where} answered HTTP {status} {response.reason_phrase}" + (
        f": {excerpt}" if excerpt else ""
    )
    if status >= 500 or status == 429:
        raise _TransientDeliveryError(answered)
    if 300 <= status < 400:
        raise DeliveryError(f"{answered}; redirects are not followed: configure the URL it points to")
    if status in {401, 403, 404, 410}:
        raise DeliveryError(f"{answered}; check that the webhook URL and its token are current")
    raise DeliveryError(f"{answered}; the receiver refused this request and will refuse it again")


def _check_url(url: str, where: str) -> None:
    """Refuse a URL no attempt could deliver to: no host, or a port outside 1-65535."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise DeliveryError(f"cannot deliver to {where}: invalid URL: {_scrub(str(exc), url)}") from exc
    if not parts.hostname:
        raise DeliveryError(f"cannot deliver to {where}: the URL has no host")
    if port == 0:
        raise DeliveryError(f"cannot deliver to {where}: invalid port 0: a port is a number from 1 to 65535")


def _scrub(text: str, url: str) -> str:
    """Remove the URL and its path and query from text an HTTP library or a receiver produced."""
    parts = urlsplit(url.strip())
    secrets = [url, url.strip(), parts.path + "?" + parts.query, parts.path, parts.query, parts.fragment]
    if parts.netloc != parts.netloc.rpartition("@")[2]:
        secrets.append(parts.netloc.rpartition("@")[0])
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) > 1:
            text = text.replace(secret, "<redacted>")
    return text


@functools.cache
def _user_agent() -> str:
    try:
        version = importlib.metadata.version("llm-launch-watchdog")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return f"llm-launch-watchdog/{version}"
