"""Deliver a JSON notification to a webhook URL over HTTP, with retries, never revealing the URL's secret."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

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
    """POST `payload` as a JSON body to an http:// or https:// URL (`watch --notify`, the `webhook` notifier).

    The delivery itself is `watchdog.notifiers.delivery.deliver`: network errors, timeouts, 5xx and 429
    answers are retried with exponential backoff and jitter (a 429's Retry-After honoured); other non-2xx
    answers are not, since sending the same request again cannot change them. Error messages name the
    receiver by `redact_url(url)` only.

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
    from watchdog.notifiers.delivery import deliver, open_client  # noqa: PLC0415 - it imports this module
    from watchdog.notifiers.message import Message  # noqa: PLC0415

    message = Message(json=payload)
    message.body()  # a payload that is not JSON is the caller's bug: TypeError before any network
    async with open_client(timeout) as client:
        await deliver(
            url, message, client=client, timeout=timeout, attempts=attempts, backoff=backoff, name="webhook"
        )
