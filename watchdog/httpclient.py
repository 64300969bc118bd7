"""The HTTP client of every request watchdog makes (alerts, health probes): aiohttp sessions on one TLS
context, and what their errors mean, in words."""

from __future__ import annotations

import functools
import os
import ssl

import aiohttp
import anyio.to_thread

__all__ = ["create_session", "error_reason", "tls_context", "tls_problem"]

# The ssl errors that are a dropped connection rather than a TLS problem: "no answer", not a TLS error.
_TLS_DROPPED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every request, built once: building one costs tens of milliseconds, which a watcher
    pays at start-up (see `watch`), not between its verdict and the webhook. It trusts the system's
    certificate authorities, or those of the files `SSL_CERT_FILE` and `SSL_CERT_DIR` name."""
    return ssl.create_default_context()


async def create_session(timeout: float, *, trust_env: bool) -> aiohttp.ClientSession:  # noqa: ASYNC109
    """A session (`async with` it) on the one TLS context, built off the event loop; `timeout` bounds a request;
    with `trust_env` requests go through the proxy that HTTP_PROXY, HTTPS_PROXY and NO_PROXY name."""
    context = await anyio.to_thread.run_sync(tls_context)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context),
        timeout=aiohttp.ClientTimeout(total=timeout),
        trust_env=trust_env,
    )


def tls_problem(exc: BaseException) -> str | None:
    """What is wrong with TLS, if an ssl error (not a dropped connection) is behind `exc`, in words."""
    seen: BaseException | None = exc
    while seen is not None:  # aiohttp's errors are ssl errors too: the ssl module's own says what went wrong
        if isinstance(seen, aiohttp.ClientConnectorCertificateError):
            seen = seen.certificate_error
        elif isinstance(seen, aiohttp.ClientConnectorError):
            seen = seen.os_error
        elif isinstance(seen, ssl.SSLError):
            break
        else:
            seen = seen.__cause__ or seen.__context__
    if seen is None or isinstance(seen, _TLS_DROPPED):
        return None
    if isinstance(seen, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {seen.verify_message or seen}"
    code = getattr(seen, "reason", None)  # "WRONG_VERSION_NUMBER"; not every SSLError has one
    reason = code.lower().replace("_", " ") if isinstance(code, str) else str(seen)
    return reason + (" (is it a plain http port?)" if code == "WRONG_VERSION_NUMBER" else "")


def error_reason(exc: BaseException) -> str:
    """Why a request got no answer, in words: `connection refused`, `TLS problem: ...`, `cannot resolve ...`."""
    if (tls := tls_problem(exc)) is not None:
        return f"TLS problem: {tls}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve {exc.host}: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error  # asyncio's "Connect call failed (...)" says less than its errno
        why = os.strerror(os_error.errno).lower() if os_error.errno else os_error.strerror or str(os_error)
        if isinstance(exc, aiohttp.ClientProxyConnectionError):
            return f"cannot connect to the proxy {exc.host}:{exc.port}: {why}"
        return why
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"the proxy answered HTTP {exc.status} {exc.message}"
    return f"{type(exc).__name__}: {exc}"
