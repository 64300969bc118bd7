"""Rules read from the engines' sources and their real output for what the nineteenth crop of public 2025-2026
vLLM, Ollama and llama.cpp logs showed (issue 30, part B), each pinned on the real log that showed it
(tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_JOURNAL_NO_HOST = (
    "ollama-0.6.1-journal-register-dump-runner-terminated-exit-2-generate-500-vram-not-recovered-issue9976"
)


def test_journal_time_without_its_host_and_identifier_is_peeled() -> None:
    """Journal excerpts pasted into public issues often lose the host and the identifier after the time
    ('Mar 25 08:53:54: ' for 'Mar 25 08:53:54 host ollama[1839]: ', ollama#9976 in 2025 and #16499 in 2026): the
    envelope peels that prefix as it peels journald's own, so that Ollama's logfmt layer under it is read. Here
    Ollama 0.6.1's llm/server.go 'llama runner terminated' error="exit status 2" (the Go runtime's exit after a
    fatal signal) is then the runner's death told only by its exit status: killed, not other."""
    out = _verdict("ollama", _JOURNAL_NO_HOST)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "killed"
    assert found["summary"] == '"llama runner terminated" error="exit status 2"'


def test_journal_prefix_without_host_keeps_the_lines_time(tmp_path: Path) -> None:
    """The peeled prefix's time is the line's time (as with journald's full prefix): the record's clock is read
    from it, not lost with it (the same two lines with their host and identifier give the same verdict)."""
    lines = (
        (CORPUS / "ollama" / f"{_JOURNAL_NO_HOST}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    )
    crop = [line for line in lines if "llama runner terminated" in line]
    full = tmp_path / "full-prefix.log"
    full.write_text(
        "".join(line.replace(": time=", " host ollama[1839]: time=", 1) for line in crop), encoding="utf-8"
    )
    short = tmp_path / "short-prefix.log"
    short.write_text("".join(crop), encoding="utf-8")
    a, b = replay_path(full)[1].to_json(), replay_path(short)[1].to_json()
    assert _error(a)["summary"] == _error(b)["summary"] == '"llama runner terminated" error="exit status 2"'
    assert a["timeline"] == b["timeline"]


def test_router_proxying_a_request_is_serving_and_its_proxy_error_a_requests() -> None:
    """llama-server in router mode (--models-preset, 2025-12+) logs 'proxying request to model NAME on port N'
    (tools/server/server-models.cpp server_models::proxy_request, SRV_INF) only for a model that is loaded and
    running (it throws 'is not running' otherwise): the router serves. The proxy's failure for that one request
    ('srv    operator(): http client error: Failed to read connection', server-http.cpp server_http_proxy's
    thread, answered 500 'proxy error: ...') is that request's error, not a crash (llama.cpp#25396, 2026)."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-router-proxy-request-failed-to-read-connection-child-served-issue25396"
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out.get("error") is None
